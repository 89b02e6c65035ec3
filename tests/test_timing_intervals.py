"""scripts/gpu/timing_intervals.py splits published samples into the rounds they were taken in."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("timing_intervals", REPO / "scripts/gpu/timing_intervals.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rounds_come_from_the_record_or_from_the_plan():
    split = _script().split
    assert split({"samples_ms": [1, 2, 3], "round_sizes": [1, 2]}) == [[1], [2, 3]]
    plan = split({"samples_ms": list(range(6 + 19 * 53))})  # the 30-iteration plan, 1,013 samples
    assert [len(r) for r in plan] == [6] + [53] * 19 and plan[1][0] == 6
    assert split({"samples_ms": [1, 2]}) == [[1, 2]]  # no plan fits: one round


def test_the_table_has_a_row_per_verdict(tmp_path, capsys, monkeypatch):
    side = {"samples_ms": [1.0] * 6 + [1.0] * 24, "round_sizes": [6, 6, 6, 6, 6]}
    row = {"task": "tr-x", "timing": {"candidate": side, "reference": side, "speedup_ci95": [1.0, 1.0]}}
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({"task": "tr-failed", "timing": None}) + "\n")
    monkeypatch.setattr("sys.argv", ["timing_intervals.py", str(path)])
    _script().main()
    out = capsys.readouterr().out
    assert "| tr-x | 5 | 1.000 | [1.000, 1.000] | [1.000, 1.000] |" in out and "tr-failed" not in out
