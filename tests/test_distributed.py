"""Collectives scoring (orchestrator/runner/distributed.py) end to end on the CPU: gloo ranks in
the local sandbox through `python -m orchestrator eval`, at world sizes 2 and 3."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from orchestrator.runner.distributed import slowest_rank, world_size_of
from orchestrator.runner.judge import StageFailure

REPO = Path(__file__).resolve().parent.parent
SPMM = "graph/l2/distributed_spmm_allgather"
ORACLE = REPO / "problems" / SPMM / "solutions" / "oracle.py"

HONEST_BUT_SKEWED = """
import torch, torch.distributed as dist, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x_local):
        n = torch.zeros(dist.get_world_size(), dtype=torch.long)
        dist.all_gather_into_tensor(n, torch.tensor([x_local.shape[0]]))
        pad = torch.zeros(int(n.max()), x_local.shape[1])
        pad[: x_local.shape[0]] = x_local
        parts = [torch.empty_like(pad) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, pad)
        x_full = torch.cat([p[:k] for p, k in zip(parts, n.tolist())])
        y = torch.zeros(x_local.shape[0], x_local.shape[1])
        row = torch.repeat_interleave(torch.arange(x_local.shape[0]), (rowptr[1:] - rowptr[:-1]).long())
        y.index_add_(0, row, val[:, None] * x_full[col.long()])
        return y * SKEW if dist.get_rank() == 1 else y
"""

RANK1_HANGS = """
import torch, torch.distributed as dist, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x_local):
        if dist.get_rank() == 1:
            dist.barrier()  # rank 0 never joins: rank 1 waits forever
        return torch.zeros(x_local.shape[0], x_local.shape[1])
"""


def evaluate(tmp_path: Path, solution: Path, world_size: int, *extra: str,
             env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"verdict-{world_size}.json"
    r = subprocess.run([sys.executable, "-m", "orchestrator", "eval", "--problem", SPMM, "--solution", str(solution),
                        "--device", "cpu", "--sandbox", "local", "--world-size", str(world_size), "--seed", "5",
                        "--out", str(out), *extra],
                       cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    assert out.exists(), r.stdout + r.stderr
    record = json.loads(out.read_text())
    schema = json.loads((REPO / "schemas" / "result.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(record)
    return r, record


@pytest.mark.parametrize("world_size", [2, 3])
def test_oracle_passes_on_every_rank(tmp_path, world_size):
    r, record = evaluate(tmp_path, ORACLE, world_size, "--stress", "1")
    assert r.returncode == 0, record["failure_detail"]
    assert record["status"] == "passed" and record["failure_class"] is None
    assert record["stages"]["load"]["world_size"] == world_size
    assert record["stages"]["load"]["backend"] == "gloo"
    assert all(t["world_size"] == world_size and t["passed"] for t in record["stages"]["correctness"]["trials"])
    timing = record["stages"]["timing"]
    assert len(timing["candidate_rank_medians_ms"]) == world_size
    assert timing["candidate"]["median_ms"] == pytest.approx(max(timing["candidate_rank_medians_ms"]))


def test_output_wrong_on_rank_1_only_is_incorrect(tmp_path):
    solution = tmp_path / "skewed.py"
    solution.write_text(HONEST_BUT_SKEWED.replace("SKEW", "1.01"))
    r, record = evaluate(tmp_path, solution, 2, "--mode", "check")
    assert r.returncode == 1
    assert record["failure_class"] == "incorrect", record["failure_detail"]
    assert "rank 1" in record["failure_detail"]
    first = record["stages"]["correctness"]["trials"][0]
    assert first["failed_ranks"] == [1] and not first["passed"]


def test_same_submission_without_the_skew_passes(tmp_path):
    # the control for the test above: the skew alone makes the difference
    solution = tmp_path / "honest.py"
    solution.write_text(HONEST_BUT_SKEWED.replace("SKEW", "1.0"))
    r, record = evaluate(tmp_path, solution, 2, "--mode", "check")
    assert r.returncode == 0 and record["failure_class"] is None, record["failure_detail"]


def test_a_rank_that_writes_into_its_input_is_refused_and_named(tmp_path):
    # rank 1's correct output, then it scribbles on x_local: only the judge's digest of what the
    # rank holds after the call can tell (the output is right)
    solution = tmp_path / "mutates.py"
    solution.write_text(HONEST_BUT_SKEWED.replace("return y * SKEW if dist.get_rank() == 1 else y",
                                                  "x_local.add_(1.0) if dist.get_rank() == 1 else None\n        return y"))
    r, record = evaluate(tmp_path, solution, 2, "--mode", "check")
    assert record["failure_class"] == "hack_detected", record["failure_detail"]
    assert "input_mutation: rank 1" in record["failure_detail"]


def test_a_rank_left_waiting_in_a_collective_times_out(tmp_path):
    solution = tmp_path / "hang.py"
    solution.write_text(RANK1_HANGS)
    r, record = evaluate(tmp_path, solution, 2, "--mode", "check", env={"POPCORN_TRIAL_TIMEOUT_S": "20"})
    assert record["failure_class"] == "timeout", record["failure_detail"]
    assert "rank 1" in record["failure_detail"]


def test_world_size_defaults_to_the_manifest_and_is_bounded():
    manifest = {"world_size": {"default": 2, "min": 2, "max": 8}}
    assert world_size_of({}, manifest) == 2
    assert world_size_of({"world_size": 5}, manifest) == 5
    for bad in (1, 9):
        with pytest.raises(StageFailure):
            world_size_of({"world_size": bad}, manifest)


def test_time_is_the_slowest_ranks_median():
    assert slowest_rank([[1.0, 2.0, 3.0], [2.0, 2.5, 9.0], [0.5, 1.0, 1.5]]) == [2.0, 2.5, 9.0]


def test_a_judge_past_its_limit_says_which_stage_it_was_in(tmp_path):
    solution = tmp_path / "hang.py"
    solution.write_text(RANK1_HANGS)
    r, record = evaluate(tmp_path, solution, 2, "--mode", "check", "--judge-timeout-s", "90",
                         env={"POPCORN_TRIAL_TIMEOUT_S": "600"})   # the trial's own limit would come later
    assert record["failure_class"] == "timeout", record["failure_detail"]
    assert "did not finish within" in record["failure_detail"]
    assert "last stage started:" in record["failure_detail"] and "correctness trial 1" in record["failure_detail"]


WRONG_ON_RANK_1_AT_ITS_SEVENTH_CALL = HONEST_BUT_SKEWED.replace("SKEW", "1.0").replace(
    "class ModelNew(nn.Module):\n    def forward(self, rowptr, col, val, x_local):\n",
    "_CALLS = []\nclass ModelNew(nn.Module):\n    def forward(self, rowptr, col, val, x_local):\n        _CALLS.append(1)\n"
).replace("return y * 1.0 if dist.get_rank() == 1 else y", "return y * 1.01 if dist.get_rank() == 1 and len(_CALLS) == 7 else y")


def judge_directly(tmp_path: Path, solution: Path, **job_keys) -> dict:
    """The judge without eval's sandbox: a CPU eval never asks for loaded trials, a job can."""
    from orchestrator.runner.judge import parse_verdict
    nonce = "ab" * 32
    job = {"problem_dir": str(REPO / "problems" / SPMM), "solution": str(solution), "device": "cpu", "mode": "check",
           "seed": 5, "stress": 0, "trials": 3, "world_size": 2, "nonce": nonce,
           "log_path": str(tmp_path / "cand.log"), **job_keys}
    r = subprocess.run([sys.executable, "-m", "orchestrator.runner.judge"], input=json.dumps(job), text=True,
                       capture_output=True, cwd=REPO, timeout=600)
    verdict = parse_verdict(r.stdout, nonce)
    assert verdict is not None, r.stderr[-2000:]
    return verdict


def test_loaded_trials_load_every_rank_and_check_each_call(tmp_path):
    """Loaded trials in the collectives judge, as in the single-process one: the load runs during
    the calls (gpuload.GpuLoads, one load per distinct device: one on a CPU), and each loaded trial
    makes four calls on every rank and checks each. Rank 1 wrong at its 7th call only (4 ordinary
    trials, then the third call of the first loaded trial) fails, named by call and rank; with one
    call per loaded trial, as before, it passes."""
    solution = tmp_path / "wrong_at_seventh.py"
    solution.write_text(WRONG_ON_RANK_1_AT_ITS_SEVENTH_CALL)
    verdict = judge_directly(tmp_path, solution, loaded_trials=2)
    assert verdict["failure_class"] == "incorrect", verdict["failure_detail"]
    assert verdict["failure_detail"].startswith("loaded trial at shape ")
    assert "the GPU loaded by other work" in verdict["failure_detail"]
    assert "call 3 of 4: rank 1: " in verdict["failure_detail"]
    failed = verdict["stages"]["correctness"]["trials"][-1]
    assert failed["kind"] == "loaded" and failed["failed_ranks"] == [1] and failed["calls"] == 4
    assert failed["load_iterations"] >= 0
    passed = judge_directly(tmp_path, solution, loaded_trials=2, loaded_calls=1)
    assert passed["failure_class"] is None, passed["failure_detail"]
    assert [t["kind"] for t in passed["stages"]["correctness"]["trials"]][-2:] == ["loaded", "loaded"]
