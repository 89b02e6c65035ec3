"""The command line: bad input gives one clear line and a non-zero exit; records validate."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import statistics
import sys
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parent.parent
SPMV = "graph/l1/csr_spmv"


def cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def verdict_schema() -> jsonschema.Draft202012Validator:
    schema = json.loads((REPO / "schemas" / "result.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def test_help_explains_every_command():
    r = cli("--help")
    assert r.returncode == 0
    for command in ("list", "validate", "eval", "run", "report", "images"):
        assert command in r.stdout
    r = cli("eval", "--help")
    assert "--stress" in r.stdout and "--seed" in r.stdout and "--device" in r.stdout


def test_unknown_problem_is_one_line_and_exit_2(tmp_path):
    sol = tmp_path / "s.py"
    sol.write_text("class ModelNew: pass\n")
    r = cli("eval", "--problem", "graph/l1/no_such_problem", "--solution", str(sol))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown problem" in r.stderr


def test_unreadable_solution_is_one_line_and_exit_2(tmp_path):
    r = cli("eval", "--problem", SPMV, "--solution", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "cannot read the submission" in r.stderr
    assert r.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("source,failure", [
    ("import torch\nclass NotIt(torch.nn.Module):\n    pass\n", "compile_error"),
    ("class ModelNew(:\n", "compile_error"),
    ("import torch\nraise ImportError('no such kernel library')\nclass ModelNew(torch.nn.Module):\n    pass\n",
     "compile_error"),
    ("import os, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, *a):\n        os.abort()\n",
     "runtime_error"),
    ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, *a):\n        raise ValueError('boom')\n",
     "runtime_error"),
])
def test_broken_submissions_fail_with_their_class(tmp_path, source, failure):
    sol = tmp_path / "s.py"
    sol.write_text(source)
    out = tmp_path / "verdict.json"
    r = cli("eval", "--problem", SPMV, "--solution", str(sol), "--device", "cpu", "--stress", "1",
            "--sandbox", "local", "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    record = json.loads(out.read_text())
    verdict_schema().validate(record)
    assert record["status"] == "failed" and record["failure_class"] == failure, record["failure_detail"]


def test_oracle_passes_and_its_record_validates(tmp_path):
    out = tmp_path / "verdict.json"
    oracle = REPO / "problems" / SPMV / "solutions" / "oracle.py"
    r = cli("eval", "--problem", SPMV, "--solution", str(oracle), "--device", "cpu", "--stress", "2",
            "--sandbox", "local", "--seed", "11", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    record = json.loads(out.read_text())
    verdict_schema().validate(record)
    assert record["status"] == "passed" and record["failure_class"] is None
    assert record["stages"]["stress"]["seed"] == 11 and record["stages"]["stress"]["n"] == 2
    timing = record["stages"]["timing"]
    assert timing["unit"] == "cpu_wall"
    for side in ("candidate", "reference"):  # every sample published, in order; no allocator on a CPU
        samples = timing[side]["samples_ms"]
        assert len(samples) == timing[side]["n"] and statistics.median(samples) == pytest.approx(timing[side]["median_ms"], abs=1e-5)
        assert timing[side]["device_allocs"] == 0
        assert len(timing[side]["round_sizes"]) == len(timing[side]["calls_per_region"]) >= 1
    assert record["sandbox"]["isolation"]["network"] == "namespace"
    assert len(record["stages"]["correctness"]["trials"]) >= 4
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert record["versions"]["git"] == (head or None)  # the code that judged, and whether it was edited
    assert record["versions"]["git_dirty"] in ((True, False) if head else (None,))


def test_calls_per_region_setting_reaches_both_sides(tmp_path):
    out = tmp_path / "verdict.json"
    oracle = REPO / "problems" / SPMV / "solutions" / "oracle.py"
    r = cli("eval", "--problem", SPMV, "--solution", str(oracle), "--device", "cpu", "--stress", "0",
            "--sandbox", "local", "--seed", "11", "--out", str(out), env={"POPCORN_TIMING_CALLS_PER_REGION": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    timing = json.loads(out.read_text())["stages"]["timing"]
    assert timing["candidate"]["calls_per_region"] == timing["reference"]["calls_per_region"] == [1]


def test_invalid_manifest_names_file_and_pointer(tmp_path):
    problems = tmp_path / "problems"
    shutil.copytree(REPO / "problems" / SPMV, problems / SPMV)
    manifest = problems / SPMV / "manifest.json"
    data = json.loads(manifest.read_text())
    data["shapes"]["n_rows"]["default"] = 10 ** 9
    data["level"] = 7
    manifest.write_text(json.dumps(data))
    r = cli("validate", "--no-run", env={"POPCORN_PROBLEMS_DIR": str(problems)})
    assert r.returncode == 1
    assert f"{manifest}: /level" in r.stderr
    data["level"] = 1
    manifest.write_text(json.dumps(data))
    r = cli("validate", "--no-run", env={"POPCORN_PROBLEMS_DIR": str(problems)})
    assert r.returncode == 1 and f"{manifest}: /shapes/n_rows/default" in r.stderr
    manifest.write_text("{ not json")
    r = cli("validate", env={"POPCORN_PROBLEMS_DIR": str(problems)})
    assert r.returncode == 2 and "invalid JSON" in r.stderr


def test_validate_on_cuda_without_a_gpu_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = cli("validate", "--device", "cuda", "--problem", SPMV)
    assert r.returncode == 2 and "no CUDA GPU" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.gpu
def test_validate_on_a_gpu_refuses_a_reference_that_leaves_no_room_for_the_candidate(tmp_path):
    """At the maximum shape the reference may need at most REFERENCE_GPU_SHARE of the GPU: the
    judge runs the candidate beside it. A copy of csr_spmv whose reference holds 60 % of the GPU
    fails; the unmodified copy (the control) passes."""
    problems = tmp_path / "problems"
    shutil.copytree(REPO / "problems" / SPMV, problems / SPMV)
    args = ("validate", "--device", "cuda", "--problem", SPMV)
    env = {"POPCORN_PROBLEMS_DIR": str(problems)}
    r = cli(*args, env=env)
    assert r.returncode == 0, r.stderr
    reference = problems / SPMV / "reference.py"
    reference.write_text(reference.read_text().replace(
        "        lengths = rowptr[1:] - rowptr[:-1]\n",
        "        lengths = rowptr[1:] - rowptr[:-1]\n"
        "        total = torch.cuda.get_device_properties(x.device).total_memory\n"
        "        hog = torch.empty(int(0.6 * total), dtype=torch.uint8, device=x.device)\n", 1))
    assert "hog = " in reference.read_text()
    r = cli(*args, env=env)
    assert r.returncode == 1 and "GiB of GPU memory, more than 45%" in r.stderr, r.stderr


def test_list_filters():
    r = cli("list", "--track", "popcorn2", "--domain", "graph", "--json")
    ids = [json.loads(line)["id"] for line in r.stdout.splitlines()]
    assert SPMV in ids and all(i.startswith("graph/") for i in ids)


def test_list_ids_of_single_gpu_oracles_match_the_json_fields():
    rows = [json.loads(line) for line in cli("list", "--track", "subdomain", "--json").stdout.splitlines()]
    r = cli("list", "--track", "subdomain", "--oracle", "--single-gpu", "--ids")
    assert r.returncode == 0, r.stderr
    ids = r.stdout.split()
    assert ids == [row["id"] for row in rows if row["oracle"] and not row["collectives"]]
    assert SPMV in ids and not any("distributed_" in i for i in ids)
    assert any(row["collectives"] for row in rows) and len(ids) < len(rows)


def test_cpu_demo_scores_one_oracle_per_domain_and_level():
    from orchestrator.catalog import load_catalog, select
    from orchestrator.config import Settings
    from orchestrator.demo import one_per_cell

    entries = select(load_catalog(Settings()), track="subdomain", oracle=True, single_gpu=True)
    chosen = one_per_cell(entries)
    cells = {(e.domain, e.level) for e in entries}
    assert len(chosen) == len(cells) and {(e.domain, e.level) for e in chosen} == cells
