"""Real parts end to end on a CPU: the scripted model over HTTP, `python -m orchestrator
run` in a subprocess, the local sandbox, the real scoring pipeline and judge; then
`rescore` of the run's artifact with the same secret seed."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest
from scripted_server import ScriptedServer, tool_calls, usage

from orchestrator.agent.harness import derive_seed
from orchestrator.agent.records import RunDir
from orchestrator.config import REPO_ROOT

SCHEMA = json.loads((REPO_ROOT / "schemas" / "result.schema.json").read_text())

BROKEN = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, rowptr, col, val, x):
        raise RuntimeError("kernel not written yet")
'''
FORBIDDEN = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, rowptr, col, val, x):
        lengths = rowptr[1:] - rowptr[:-1]
        return torch.segment_reduce(val * x[col.long()], "sum", lengths=lengths)
'''
# Pure PyTorch, no forbidden op: row sums as differences of a float64 running total.
FAST = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, rowptr, col, val, x):
        prod = val.double() * x.double()[col.long()]
        total = torch.cat([prod.new_zeros(1), torch.cumsum(prod, 0)])
        ends = rowptr.long()
        return (total[ends[1:]] - total[ends[:-1]]).to(x.dtype)
'''

FAST_SETTINGS = {"POPCORN_STRESS": "1", "POPCORN_TIMING_ITERS_CPU": "1", "POPCORN_TIMING_WARMUP": "0",
                 "POPCORN_TIMING_INPUT_SETS": "1", "POPCORN_DEVICE": "cpu", "POPCORN_SANDBOX": "local"}


def _cli(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=REPO_ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_mt_default_with_the_real_pipeline_then_rescore(tmp_path):
    env = {**os.environ, **FAST_SETTINGS, "POPCORN_RESULTS_DIR": str(tmp_path), "POPCORN_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(REPO_ROOT), "POPCORN_TEST_KEY": "k"}
    script = [
        tool_calls(("specs", {}), ("check", {"code": BROKEN}), use=usage(3000, 400, cached=0)),
        tool_calls(("static_analysis", {"code": FORBIDDEN}), use=usage(3500, 300, cached=3000)),
        tool_calls(("check", {"code": FAST}), use=usage(4000, 500, cached=3500, reasoning=200)),
        tool_calls(("submit", {}), use=usage(4500, 20, cached=4000)),
    ]
    with ScriptedServer(script) as server:
        done = _cli(["run", "--harness", "mt-default", "--model", "scripted-model", "--base-url", server.url,
                     "--api-key-env", "POPCORN_TEST_KEY", "--problems", "graph/l1/csr_spmv", "--run-id", "e2e",
                     "--quiet"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    run = RunDir(tmp_path / "e2e")
    [record] = run.load_records()
    jsonschema.validate(record, {**SCHEMA, "oneOf": [{"$ref": "#/$defs/episode"}]})
    assert record["status"] == "completed" and record["turns"] == 4
    assert record["tokens"] == {"prompt": 15000, "completion": 1220, "cached": 10500, "reasoning": 200, "total": 16220}
    assert record["tools_used"] == {"specs": 1, "check": 2, "static_analysis": 1, "submit": 1}
    verdict = record["verdict"]
    assert verdict["status"] == "passed" and verdict["device"]["type"] == "cpu"
    assert verdict["solution"]["sha256"] == record["artifact"]["sha256"]
    seed = derive_seed(run.read_run()["run_seed"], record["episode_id"])
    assert verdict["stages"]["stress"]["seed"] == seed  # the episode's secret seed, never shown to the model

    outputs = {i: [m["content"] for m in server.tool_messages(i)] for i in range(1, 4)}
    specs, check_broken = outputs[1]
    assert "CPU only" in specs and "torch" in specs
    assert check_broken.startswith("check: failed (runtime_error)") and "kernel not written yet" in check_broken
    analysis = outputs[2][-1]
    assert "forbidden_call" in analysis and "segment_reduce" in analysis and "would reject" in analysis
    assert outputs[3][-1].startswith("check: passed")
    everything_sent = json.dumps(server.requests)
    assert str(seed) not in everything_sent  # nor the seed, nor any stress shape
    transcript = json.loads((run.path / record["transcript"]).read_text())
    assert transcript["artifact"]["code"] == FAST and len(transcript["calls"]) == 4

    rescored = _cli(["rescore", "e2e", "--output", str(tmp_path / "rescore.jsonl"), "--quiet"], env)
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    [again] = run.load_records(tmp_path / "rescore.jsonl")
    assert again["episode_id"] == record["episode_id"] and again["status"] == "completed"
    assert again["verdict"]["status"] == "passed" and again["verdict"]["stages"]["stress"]["seed"] == seed
    assert again["rescore"]["previous_verdict_status"] == "passed"
    assert run.load_records() == [record]  # the original records are untouched


@pytest.mark.slow
def test_oracle_calls_every_mt_all_tool_on_a_cpu(tmp_path):
    """The GPU verification's agent on a CPU: GPU-only tools say so, the rest work."""
    env = {**os.environ, **FAST_SETTINGS, "POPCORN_RESULTS_DIR": str(tmp_path), "POPCORN_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(REPO_ROOT)}
    done = _cli(["run", "--harness", "mt-all", "--model", "oracle:tools", "--problems", "graph/l1/csr_spmv",
                 "--run-id", "tools", "--quiet"], env, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    run = RunDir(tmp_path / "tools")
    [record] = run.load_records()
    assert record["status"] == "completed" and record["verdict"]["status"] == "passed"
    oks = {c["name"]: c["ok"] for c in record["tool_calls"]}
    assert oks == {"compile": True, "check": True, "specs": True, "static_analysis": True, "profile": False,
                   "disassemble": False, "roofline": True, "submit": True}
    transcript = json.loads((run.path / record["transcript"]).read_text())
    roofline = next(transcript["messages"][c["message_index"]]["content"] for c in transcript["tool_calls"]
                    if c["name"] == "roofline")
    assert "ceilings of" in roofline and "arithmetic intensity" in roofline
    assert list((tmp_path / "cache" / "ceilings").glob("cpu-*.json"))
