"""Every manifest validates; the loader reports what `list` needs; broken manifests fail clearly."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.errors import ManifestError, ProblemNotFound
from orchestrator.translation.catalog import find_task, iter_tasks, load_tasks

TRANSLATION = REPO_ROOT / "translation"


def test_every_manifest_validates_and_lists() -> None:
    tasks = load_tasks(TRANSLATION)
    ids = [t["id"] for t in tasks]
    assert "tr-cutlass-cute-hgemm" in ids and "tr-cutlass-tf32-gemm" in ids
    assert len(ids) == len(set(ids))
    for t in tasks:
        assert t["family"] in {"vLLM", "FA2", "Marlin", "CUTLASS"}
        assert t["track"] in {"translation-single", "translation-multi"}
        assert Path(t["path"]).name == t["id"]
        assert set(t) >= {"id", "title", "family", "track", "path", "manifest"}


def test_multi_gpu_tasks_keep_nvlink_multicast_off() -> None:
    for task in iter_tasks(TRANSLATION):
        if task.is_multi:
            assert task.manifest["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"
            assert task.manifest["world_size"]["default"] == 8
            assert task.manifest["world_size"]["min"] == 2


def _rewrite(root: Path, task_id: str, edit) -> Path:
    path = root / "single" / task_id / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    return path


def test_bad_sha256_format_names_file_and_pointer(translation_copy: Path) -> None:
    path = _rewrite(translation_copy, "tr-cutlass-tf32-gemm",
                    lambda m: m["pins"]["cutlass42"].__setitem__("sha256", "not-a-hash"))
    with pytest.raises(ManifestError) as err:
        load_tasks(translation_copy)
    assert str(path) in str(err.value) and "/pins/cutlass42/sha256" in str(err.value)


def test_unknown_pin_reference_is_rejected(translation_copy: Path) -> None:
    _rewrite(translation_copy, "tr-cutlass-cute-hgemm", lambda m: m["a100"].__setitem__("pin", "nope"))
    with pytest.raises(ManifestError, match="/a100/pin: names pin 'nope'"):
        load_tasks(translation_copy)


def test_id_must_match_folder(translation_copy: Path) -> None:
    _rewrite(translation_copy, "tr-cutlass-cute-hgemm", lambda m: m.__setitem__("id", "tr-other"))
    with pytest.raises(ManifestError, match="differs from the folder name"):
        load_tasks(translation_copy)


def test_default_shape_must_satisfy_constraints(translation_copy: Path) -> None:
    _rewrite(translation_copy, "tr-cutlass-tf32-gemm", lambda m: m.__setitem__("constraints", ["m < 8"]))
    with pytest.raises(ManifestError, match="violates 'm < 8'"):
        load_tasks(translation_copy)


def test_multicast_on_is_rejected(translation_copy: Path) -> None:
    multi = [t for t in iter_tasks(translation_copy) if t.is_multi]
    if not multi:
        pytest.skip("no multi-GPU task yet")
    path = multi[0].path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["nccl_env"]["NCCL_NVLS_ENABLE"] = "1"
    path.write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match="NCCL_NVLS_ENABLE"):
        load_tasks(translation_copy)


def test_unknown_task_lists_known_ids() -> None:
    with pytest.raises(ProblemNotFound, match="tr-cutlass-cute-hgemm"):
        find_task("tr-does-not-exist", TRANSLATION)
