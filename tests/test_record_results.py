"""scripts/gpu/record_results.py writes an H200 reference time only where it was measured at the
manifest's current default shape (a shrunk default leaves null until measured again)."""
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROBLEM = "graph/l1/csr_spmv"


@pytest.fixture()
def recorder(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("record_results", REPO / "scripts/gpu/record_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shutil.copytree(REPO / "problems" / PROBLEM, tmp_path / "problems" / PROBLEM)
    monkeypatch.setattr(module, "REPO", tmp_path)
    monkeypatch.syspath_prepend(str(REPO))
    return module, tmp_path / "problems" / PROBLEM / "manifest.json"


def run(module, tmp_path, rows, monkeypatch):
    results = tmp_path / "rows.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(sys, "argv", ["record_results.py", str(results), "--write-manifests"])
    assert module.main() == 0


def set_reference(manifest: Path, value) -> None:
    data = manifest.read_text()
    old = json.loads(data)["reference_h200_ms"]
    manifest.write_text(data.replace(f'"reference_h200_ms": {json.dumps(old)}', f'"reference_h200_ms": {json.dumps(value)}'))


def current_default(manifest: Path) -> dict:
    from orchestrator.runner.shapes import default_shape

    return default_shape(json.loads(manifest.read_text())["shapes"], "cuda")


def row(default_shape=None):
    r = {"kind": "oracle", "problem": PROBLEM, "status": "passed", "failure": None, "speedup": 2.0,
         "ci95": [1.9, 2.1], "reference_ms": 12.5, "oracle_ms": 6.25, "stress_n": 8}
    if default_shape is not None:
        r["default_shape"] = default_shape
    return r


def test_a_row_at_the_current_default_is_written(recorder, tmp_path, monkeypatch):
    module, manifest = recorder
    set_reference(manifest, None)
    current = current_default(manifest)
    run(module, tmp_path, [row(current)], monkeypatch)
    assert json.loads(manifest.read_text())["reference_h200_ms"] == 12.5


def test_a_row_at_an_older_default_is_not_written(recorder, tmp_path, monkeypatch):
    module, manifest = recorder
    set_reference(manifest, None)
    older = {**current_default(manifest), "n_rows": 12345}
    run(module, tmp_path, [row(older)], monkeypatch)
    assert json.loads(manifest.read_text())["reference_h200_ms"] is None


def test_a_row_without_its_shape_refreshes_a_value_but_never_fills_a_null(recorder, tmp_path, monkeypatch):
    module, manifest = recorder
    set_reference(manifest, None)
    run(module, tmp_path, [row()], monkeypatch)
    assert json.loads(manifest.read_text())["reference_h200_ms"] is None
    set_reference(manifest, 3.0)
    run(module, tmp_path, [row()], monkeypatch)
    assert json.loads(manifest.read_text())["reference_h200_ms"] == 12.5


def one_call(shape, median_ms=40.0, busy=0.9):
    return {"problem": PROBLEM, "changes": {}, "wall_s": 10.0, "shape": shape, "median_ms": median_ms,
            "gpu_busy_ms": busy * median_ms, "busy_fraction": busy, "kernels": 100,
            "verdict": "gpu-bound" if busy >= 0.5 else "launch-bound"}


def test_a_gpu_bound_one_call_row_stands_in_only_where_nothing_else_is_current(recorder, tmp_path, monkeypatch):
    module, manifest = recorder
    current = current_default(manifest)
    older = {**current, "n_rows": 12345}
    set_reference(manifest, None)
    run(module, tmp_path, [one_call(current, busy=0.3)], monkeypatch)  # launch-bound: one call is not the harness's time
    assert json.loads(manifest.read_text())["reference_h200_ms"] is None
    run(module, tmp_path, [row(older), one_call(older, 7.0), one_call(current, 40.0)], monkeypatch)
    assert json.loads(manifest.read_text())["reference_h200_ms"] == 40.0
    run(module, tmp_path, [one_call(current, 40.0), row(current)], monkeypatch)  # the oracle's measure wins
    assert json.loads(manifest.read_text())["reference_h200_ms"] == 12.5


def test_the_table_says_which_measure_it_shows(recorder, tmp_path, monkeypatch, capsys):
    module, manifest = recorder
    current = current_default(manifest)
    run(module, tmp_path, [row({**current, "n_rows": 12345}), one_call(current, 40.0)], monkeypatch)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(f"| {PROBLEM} "))
    assert line.startswith(f"| {PROBLEM} | 40 (one call); oracle at an older default | passed |")


def test_a_nulled_reference_time_takes_a_current_row_over_one_that_does_not_say_its_shape(recorder, tmp_path,
                                                                                            monkeypatch):
    module, manifest = recorder
    set_reference(manifest, None)                            # nulled: the default changed since the old row
    run(module, tmp_path, [row(), one_call(current_default(manifest), 40.0)], monkeypatch)
    assert json.loads(manifest.read_text())["reference_h200_ms"] == 40.0


def test_a_row_that_does_not_say_its_shape_yields_to_a_later_row_at_an_older_default(recorder, tmp_path,
                                                                                      monkeypatch):
    """The default changed after the row without a shape: it is stale, also once the manifest holds
    a value again (a second run keeps what the first wrote)."""
    module, manifest = recorder
    current = current_default(manifest)
    older = {**current, "n_rows": 12345}
    set_reference(manifest, None)
    rows = [row(), one_call(older, 7.0), one_call(current, 40.0)]
    for _ in range(2):
        run(module, tmp_path, rows, monkeypatch)
        assert json.loads(manifest.read_text())["reference_h200_ms"] == 40.0
