"""Pins really download from PyPI, verify, unpack; tampering and missing paths fail clearly."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.translation import sources
from orchestrator.translation.catalog import find_task

SMALL_PIN = {  # byte_flux 1.0.4 sdist, 216 KB: the cheapest real pin of the track
    "package": "byte-flux", "version": "1.0.4", "file": "byte_flux-1.0.4.tar.gz",
    "sha256": "56071cd5ba6a1ac499046ed93edf368f1e5ace1b292810116007bcc3df531612",
    "size": 216511, "root": "byte_flux-1.0.4",
}



def test_small_pin_downloads_verifies_and_unpacks(cache_dir: Path) -> None:
    pin = sources.Pin.from_manifest("flux", SMALL_PIN)
    archive = sources.fetch(pin, cache_dir)
    assert archive.stat().st_size == SMALL_PIN["size"]
    assert sources.sha256_of(archive) == SMALL_PIN["sha256"]
    root = sources.unpack(pin, archive, cache_dir)
    assert (root / "src" / "reduce_scatter").is_dir()
    assert sources.resolve(pin, root, "include/flux/flux.h").is_file()


def test_tampered_sha256_fails_with_both_hashes(cache_dir: Path) -> None:
    tampered = dict(SMALL_PIN, sha256="0" * 64)
    manifest = {"id": "tr-test", "pins": {"flux": tampered}, "a100": {"pin": "flux", "sources": []},
                "h100": {"pin": "flux", "sources": []}, "build": {"includes": []}}
    with pytest.raises(sources.PinError) as err:
        sources.prepare(manifest, cache_dir)
    message = str(err.value)
    assert message.startswith("tr-test: pin flux (byte_flux-1.0.4.tar.gz): sha256 mismatch")
    assert "0" * 64 in message and SMALL_PIN["sha256"] in message
    assert "\n" not in message


def test_corrupted_cached_archive_is_detected(cache_dir: Path, tmp_path: Path) -> None:
    pin = sources.Pin.from_manifest("flux", SMALL_PIN)
    good = sources.fetch(pin, cache_dir)
    bad = tmp_path / pin.file
    data = bytearray(good.read_bytes())
    data[1000] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(sources.PinError, match="sha256 mismatch"):
        sources.check_archive(pin, bad)
    short = tmp_path / "short" / pin.file
    short.parent.mkdir()
    short.write_bytes(bytes(data[:-1]))
    with pytest.raises(sources.PinError, match="size mismatch: expected 216511 bytes"):
        sources.fetch(pin, tmp_path / "empty-cache", [short.parent], offline=True)


def test_offline_without_the_archive_says_where_it_looked(tmp_path: Path) -> None:
    pin = sources.Pin.from_manifest("flux", SMALL_PIN)
    with pytest.raises(sources.PinError, match="downloads are off"):
        sources.fetch(pin, tmp_path, [tmp_path / "nowhere"], offline=True)


def test_missing_path_names_task_pin_and_path(cache_dir: Path) -> None:
    manifest = {"id": "tr-test", "pins": {"flux": SMALL_PIN},
                "a100": {"pin": "flux", "sources": ["src/no_such_kernel.cu"]},
                "h100": {"pin": "flux", "sources": []}, "build": {"includes": []}}
    with pytest.raises(sources.PinError) as err:
        sources.prepare(manifest, cache_dir)
    assert str(err.value) == ("tr-test: a100 source 'src/no_such_kernel.cu' not found in byte_flux-1.0.4.tar.gz "
                              "(pin flux (byte_flux-1.0.4.tar.gz), root 'byte_flux-1.0.4')")


def test_calibration_task_pins_and_paths(cache_dir: Path) -> None:
    task = find_task("tr-cutlass-cute-hgemm", REPO_ROOT / "translation")
    roots = sources.prepare(task.manifest, cache_dir)
    assert (roots["cutlass42"] / "include" / "cute" / "tensor.hpp").is_file()
    broken = copy.deepcopy(task.manifest)
    broken["h100"]["sources"] = ["examples/cute/tutorial/hopper/missing.cu"]
    with pytest.raises(sources.PinError, match="h100 source 'examples/cute/tutorial/hopper/missing.cu' not found"):
        sources.prepare(broken, cache_dir)


def _fixed_pin(cache_dir: Path, **fix: str) -> tuple[sources.Pin, Path]:
    """SMALL_PIN with one source fix to include/flux/flux.h; the pristine unpack to compare with."""
    pin = sources.Pin.from_manifest("flux", SMALL_PIN)
    pristine = sources.unpack(pin, sources.fetch(pin, cache_dir), cache_dir)
    spec = {"path": "include/flux/flux.h", "sha256": sources.sha256_of(pristine / "include/flux/flux.h"),
            "old": "#pragma once", "new": "#pragma once  // fixed", "why": "a test of source fixes"}
    spec.update(fix)
    return sources.Pin.from_manifest("flux", dict(SMALL_PIN, fixes=[spec])), pristine


def test_a_source_fix_applies_in_a_tree_of_its_own(cache_dir: Path) -> None:
    pin, pristine = _fixed_pin(cache_dir)
    fixed = sources.unpack(pin, sources.fetch(pin, cache_dir), cache_dir)
    assert fixed != pristine and fixed.parent.name.startswith(SMALL_PIN["sha256"][:16] + "-fix")
    assert "#pragma once  // fixed" in (fixed / "include/flux/flux.h").read_text()
    assert "// fixed" not in (pristine / "include/flux/flux.h").read_text()  # other tasks keep upstream's file
    assert pin.identity != SMALL_PIN["sha256"] and pin.identity.startswith(SMALL_PIN["sha256"])


@pytest.mark.parametrize("fix, message", [
    ({"sha256": "1" * 64}, "source fix of include/flux/flux.h: the upstream file's sha256 is "),
    ({"old": "no such text"}, "the text to replace occurs 0 times, not once"),
    ({"old": "#include"}, "occurs 21 times, not once"),
    ({"path": "include/flux/missing.h"}, "source fix of include/flux/missing.h: no such file in the archive"),
    ({"path": "../../56071cd5ba6a1ac4/byte_flux-1.0.4/include/flux/flux.h"}, "the path leaves the archive's root"),
])
def test_a_source_fix_that_does_not_fit_fails_in_one_line(cache_dir: Path, tmp_path: Path, fix: dict,
                                                          message: str) -> None:
    pin, _ = _fixed_pin(cache_dir, **fix)
    with pytest.raises(sources.PinError, match=message) as err:
        sources.unpack(pin, sources.fetch(pin, cache_dir), tmp_path)
    assert str(err.value).startswith("pin flux (byte_flux-1.0.4.tar.gz): ") and "\n" not in str(err.value)
    assert not list((tmp_path / "translation" / "src").glob("*/.complete"))  # nothing half-fixed is kept
    pristine = sources.unpack(sources.Pin.from_manifest("flux", SMALL_PIN), sources.fetch(pin, cache_dir), cache_dir)
    assert "// fixed" not in (pristine / "include/flux/flux.h").read_text()


def test_fa2_bwd_reference_gets_examples_88_race_fix(cache_dir: Path) -> None:
    """tr-fa2-bwd's cutlass42 pin carries the dQ reducer's fix; tasks sharing the pin keep upstream's file."""
    relpath = "examples/88_hopper_fmha/collective/fmha_collective_bwd_tma_warpspecialized.hpp"
    fa2 = find_task("tr-fa2-bwd", REPO_ROOT / "translation")
    fixed = sources.prepare(fa2.manifest, cache_dir)["cutlass42"] / relpath
    upstream = sources.prepare(find_task("tr-cutlass-cute-hgemm", REPO_ROOT / "translation").manifest,
                               cache_dir)["cutlass42"] / relpath
    assert upstream.read_text().count("tma_store_wait<1>();") == 1
    assert fixed.read_text().count("tma_store_wait<1>();") == 0
    assert fixed.read_text().count("tma_store_wait<0>();") == 2
    assert fixed.read_text() == upstream.read_text().replace("tma_store_wait<1>();", "tma_store_wait<0>();")
