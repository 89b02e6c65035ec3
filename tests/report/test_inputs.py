"""Bad, empty, partial and infra-only inputs: one clear line and exit 2, or an honest empty report."""
from __future__ import annotations

import json


def test_directory_that_is_not_a_run(tmp_path, report):
    (tmp_path / "run.json").write_text("{}")
    code, out, err = report(tmp_path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "not a run directory (missing episodes.jsonl)" in err and str(tmp_path) in err
    code, _, err = report(tmp_path / "nowhere")
    assert code == 2 and "not a directory" in err


def test_record_failing_the_schema_is_named_by_file_and_line(tmp_path, synth, report):
    e = synth.episode
    records = synth.numbered([e("correct"), e("incorrect"), e("hack")])
    records[2]["verdict"]["status"] = "maybe"
    run = synth.write_run(tmp_path / "run-a", records)
    code, out, err = report(run)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert f"{run / 'episodes.jsonl'}:3" in err
    assert records[2]["episode_id"] in err and "/verdict" in err


def test_record_missing_a_required_field(tmp_path, synth, report):
    records = synth.numbered([synth.episode("correct")] * 2)
    del records[1]["tokens"]
    run = synth.write_run(tmp_path / "run-a", records)
    code, _, err = report(run)
    assert code == 2 and f"episodes.jsonl:2" in err and "'tokens' is a required property" in err


def test_line_that_is_not_json(tmp_path, synth, report):
    run = synth.write_run(tmp_path / "run-a", synth.numbered([synth.episode("correct")] * 2))
    lines = (run / "episodes.jsonl").read_text().splitlines()
    (run / "episodes.jsonl").write_text(lines[0] + "\n{oops\n" + lines[1] + "\n")
    code, _, err = report(run)
    assert code == 2 and "episodes.jsonl:2: not JSON" in err


def test_runs_of_different_benchmark_versions(tmp_path, synth, report):
    e = synth.episode
    a = synth.write_run(tmp_path / "a", [e("correct", run_id="a", version="0.1.0")], run_id="a", version="0.1.0")
    b = synth.write_run(tmp_path / "b", [e("correct", run_id="b", version="0.2.0")], run_id="b", version="0.2.0")
    code, out, err = report(a, b)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "different benchmark versions" in err and "(0.1.0)" in err and "(0.2.0)" in err


def test_empty_run_reports_no_rates(tmp_path, synth, report, report_json):
    run = synth.write_run(tmp_path / "empty", [], run_id="empty")
    code, out, err = report(run)
    assert code == 0, err
    assert "(none)" in out
    data = report_json(run)
    assert data["runs"][0]["episodes"] == 0 and data["correctness"] == []


def test_only_infra_errors_are_not_counted_against_the_model(tmp_path, synth, report_json, report):
    e = synth.episode
    records = synth.numbered([e("infra")] * 4 + [e("scoring_infra")] * 2)
    run = synth.write_run(tmp_path / "run-a", records)
    data = report_json(run)
    row = data["correctness"][0]
    assert row["episodes"] == 0 and row["infra errors"] == 6
    assert row["correct"] == {"num": 0, "den": 0, "value": None}       # no rate, not 0 %
    assert data["speed"][0]["fast_0"]["value"] is None
    assert data["resources"][0]["tokens/episode"] is None
    assert data["runs"][0]["counted"] == 0 and data["runs"][0]["infra errors"] == 6
    code, out, _ = report(run)
    assert code == 0 and "0.0 %" not in out


def test_partial_run_interrupted_mid_write_and_resumed(tmp_path, synth, report, report_json):
    e = synth.episode
    first = e("infra", episode_id="graph/l1/csr_spmv|st|model-a|0")
    retried = e("correct", episode_id="graph/l1/csr_spmv|st|model-a|0")      # the resumed run wrote it again
    other = e("incorrect", problem="graph/l1/csr_spmm", episode_id="graph/l1/csr_spmm|st|model-a|0")
    planned = ["graph/l1/csr_spmv|st|model-a|0", "graph/l1/csr_spmm|st|model-a|0", "graph/l1/sddmm|st|model-a|0"]
    run = synth.write_run(tmp_path / "run-a", [first, other, retried], planned=planned)
    (run / "episodes.infra.jsonl").write_text(json.dumps(e("infra")) + "\n")
    half = json.dumps(e("correct", problem="graph/l1/sddmm"))[:200]      # killed while writing
    with (run / "episodes.jsonl").open("a") as handle:
        handle.write(half)
    code, _, err = report(run)
    assert code == 0
    assert "episodes.jsonl:4: ignoring an incomplete last line" in err
    data = report_json(run)
    runs_row = data["runs"][0]
    assert (runs_row["planned"], runs_row["episodes"], runs_row["missing"]) == (3, 2, 1)   # sddmm never finished
    assert runs_row["rewritten"] == 1 and runs_row["infra retried"] == 1
    row = data["correctness"][0]
    assert row["infra errors"] == 0 and row["correct"] == {"num": 1, "den": 2, "value": 0.5}


def test_a_run_from_an_edited_checkout_is_reported_on_stderr(tmp_path, synth, report):
    records = [synth.episode("correct")]
    edited = synth.write_run(tmp_path / "edited", records, versions={"git": "ab" * 20, "git_dirty": True})
    code, out, err = report(edited)
    assert code == 0 and "correct" in out.lower()
    assert "edits to tracked files beyond commit abababababab (versions.git_dirty)" in err
    clean = synth.write_run(tmp_path / "clean", records, run_id="clean", versions={"git": "ab" * 20, "git_dirty": False})
    code, _, err = report(clean)
    assert code == 0 and "git_dirty" not in err


def test_unknown_grouping_key_is_a_usage_error(tmp_path, synth, report):
    run = synth.write_run(tmp_path / "run-a", [synth.episode("correct")])
    try:
        report(run, "--by", "harness,colour")
    except SystemExit as exc:                 # argparse: usage line and exit 2
        assert exc.code == 2
    else:
        raise AssertionError("an unknown --by key was accepted")


def test_the_same_run_twice_is_refused(tmp_path, synth, report):
    run = synth.write_run(tmp_path / "run-a", [synth.episode("correct")])
    code, out, err = report(run, run)
    assert code == 2 and out == "" and "the same run given twice: run-a" in err
