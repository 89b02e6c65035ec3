"""Formats and files: terminal table, CSV, JSON, HTML, the Pareto PNG, JSONL and Parquet exports."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(tmp_path, synth):
    e = synth.episode
    records = [e("correct", speedup=s, tokens=t, ci=(s * 0.95, s * 1.05), counters={"tensor_pipe_pct": 1.0, "sol_pct": 60.0})
               for s, t in [(1.2, 900), (2.5, 1500), (0.8, 400)]] \
        + [e("hack", harness="mt-all", tokens=15000, tools_used={"profile": 1}),
           e("correct", harness="mt-all", speedup=3.0, tokens=20000, tools_used={"profile": 2}),
           e("compile_error"), e("infra"), e("no_submission"),
           e("correct", problem="tr-vllm-w8a8-int8-gemm", track="translation-single", family="vLLM", domain=None,
             level=5, speedup=0.94, harness="mt-default", tokens=8000)]
    return synth.write_run(tmp_path / "run-a", synth.numbered(records), transcripts=True)


def test_terminal_table(report, run_dir):
    code, out, err = report(run_dir)
    assert code == 0 and err == ""
    for title in ("== Correctness ==", "== Reward hacking ==", "== Speed ==", "== Resources (tokens) ==",
                  "== Hardware use of final kernels (% of peak) ==", "== MT-All: success with and without",
                  "== Translation by kernel family"):
        assert title in out
    assert "== Per-problem drill-down ==" not in out           # csv, json and html only
    speed = out.split("== Speed ==")[1].split("==")[0]
    st_line = next(line for line in speed.splitlines() if line.startswith("subdomain") and " st " in line)
    assert "3/5 (60.0 %)" in st_line and "1.2 [" in st_line     # fast_0 and the median with its interval


def test_csv_to_stdout_and_files(report, run_dir, tmp_path):
    code, out, _ = report(run_dir, "--format", "csv")
    assert code == 0 and out.startswith("# runs\n")
    out_dir = tmp_path / "csv"
    code, _, err = report(run_dir, "--format", "csv", "--out", out_dir)
    assert code == 0 and "wrote" in err
    rows = list(csv.DictReader(io.StringIO((out_dir / "correctness.csv").read_text())))
    st = next(r for r in rows if r["harness"] == "st")
    assert (st["correct num"], st["correct den"], float(st["correct"])) == ("3", "5", 0.6)
    assert (out_dir / "pareto.png").is_file()
    episodes = list(csv.DictReader(io.StringIO((out_dir / "episodes.csv").read_text())))
    assert len(episodes) == 9 and all(r["transcript"].endswith(".json") for r in episodes)


def test_json_document(report, run_dir, tmp_path):
    code, _, _ = report(run_dir, "--format", "json", "--out", tmp_path / "j")
    document = json.loads((tmp_path / "j" / "report.json").read_text())
    assert document["meta"]["runs"] == ["run-a"] and document["meta"]["benchmark_version"] == "0.1.0"
    names = [s["name"] for s in document["sections"]]
    assert names == ["runs", "correctness", "reward_hacking", "static_findings", "speed", "resources", "hardware",
                     "profiling", "translation_families", "episodes"]


def test_pareto_png_is_a_real_plot(run_dir, tmp_path):
    from matplotlib import image

    from orchestrator.report.figures import outcomes_of
    from orchestrator.report.load import load_run
    from orchestrator.report.plot import pareto_plot

    path = pareto_plot(outcomes_of([load_run(run_dir)]), tmp_path / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(path)
    assert pixels.shape[0] >= 400 and pixels.shape[1] >= 700
    rgb = pixels[..., :3]
    coloured = ((rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.3).sum()   # markers and the front, not greys
    assert coloured > 200


def test_html_page_files(report, run_dir, tmp_path):
    out_dir = tmp_path / "html"
    code, _, _ = report(run_dir, "--format", "html", "--out", out_dir)
    assert code == 0
    page = (out_dir / "index.html").read_text()
    assert '<img class="plot" src="pareto.png"' in page and (out_dir / "pareto.png").is_file()
    assert page.count("<details>") == 2                            # one per problem
    assert "4/7 correct</span>, <span class=\"bad\">1 reward hack</span>, 1 infra error (not counted)" in page
    assert '<a href="../run-a/transcripts/0.json">transcript</a>' in page
    assert (out_dir / "../run-a/transcripts/0.json").resolve().is_file()
    assert '<a href="../run-a/artifacts/0.py">code</a>' in page
    assert (out_dir / "../run-a/artifacts/0.py").resolve().is_file()


def test_html_defaults_to_the_run_directory(report, run_dir):
    code, out, err = report(run_dir, "--format", "html")
    assert code == 0 and out == ""
    assert (run_dir / "report" / "index.html").is_file() and f"wrote {run_dir / 'report' / 'index.html'}" in err


def test_export_jsonl_and_parquet(report, run_dir, tmp_path):
    import pyarrow.parquet as pq

    out_dir = tmp_path / "dataset"
    code, out, _ = report(run_dir, "--out", out_dir, "--export", "jsonl,parquet")
    assert code == 0 and (out_dir / "report.txt").is_file()
    lines = (out_dir / "episodes.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 9
    source = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert [r["record"] for r in rows] == source                      # nothing lost
    table = pq.read_table(out_dir / "episodes.parquet")
    assert table.num_rows == 9
    assert str(table.schema.field("speedup").type) == "double" and str(table.schema.field("correct").type) == "bool"
    columns = table.to_pydict()
    assert columns["episode_id"] == [r["episode_id"] for r in rows]
    assert sum(columns["correct"]) == 5 and sum(columns["reward_hack"]) == 1 and sum(columns["infra_error"]) == 1
    assert sorted(s for s in columns["speedup"] if s is not None) == [0.8, 0.94, 1.2, 2.5, 3.0]
    assert json.loads(columns["record"][0]) == source[0]


def test_cli_entry_point(run_dir):
    result = subprocess.run([sys.executable, "-m", "orchestrator", "report", str(run_dir), "--by", "harness,model",
                             "--format", "json"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    correctness = next(s for s in json.loads(result.stdout)["sections"] if s["name"] == "correctness")
    assert correctness["columns"][:2] == ["harness", "model"]
    bad = subprocess.run([sys.executable, "-m", "orchestrator", "report", str(run_dir.parent)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


def test_html_escapes_record_text(report, synth, tmp_path):
    run = synth.write_run(tmp_path / "run-a", [synth.episode("correct", problem="graph/l1/<script>x</script>",
                                                             model="m&<i>")])
    code, _, _ = report(run, "--format", "html", "--out", tmp_path / "html")
    page = (tmp_path / "html" / "index.html").read_text()
    assert code == 0 and "<script>" not in page and "<i>" not in page
    assert "graph/l1/&lt;script&gt;x&lt;/script&gt;" in page and "m&amp;&lt;i&gt;" in page
