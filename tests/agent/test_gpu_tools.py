"""On a CUDA machine (`make test-gpu`): every mt-all tool on the oracle of csr_spmv,
in the local sandbox, with real ncu, cuobjdump and measured ceilings."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from orchestrator.agent.records import RunDir
from orchestrator.config import REPO_ROOT

pytestmark = pytest.mark.gpu


def test_oracle_tools_on_a_gpu(tmp_path):
    env = {**os.environ, "POPCORN_RESULTS_DIR": str(tmp_path), "POPCORN_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),  # keep carried wheels
           "POPCORN_STRESS": "2"}
    done = subprocess.run([sys.executable, "-m", "orchestrator", "run", "--harness", "mt-all", "--model", "oracle:tools",
                           "--problems", "graph/l1/csr_spmv", "--device", "cuda", "--sandbox", "local",
                           "--run-id", "gpu", "--quiet"], cwd=REPO_ROOT, env=env, text=True, capture_output=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    run = RunDir(tmp_path / "gpu")
    [record] = run.load_records()
    assert record["status"] == "completed" and record["verdict"]["status"] == "passed"
    transcript = json.loads((run.path / record["transcript"]).read_text())
    out = {c["name"]: (c["ok"], transcript["messages"][c["message_index"]]["content"]) for c in transcript["tool_calls"]}
    assert all(ok for ok, _ in out.values()), {k: v[1][:500] for k, v in out.items() if not v[0]}
    assert "SMs" in out["specs"][1] and "compute capability" in out["specs"][1]
    profile = out["profile"][1]
    assert "kernel _short_rows" in profile and "speed of light: SM" in profile and "DRAM" in profile
    assert "warp stalls" in profile
    assert "== SASS _short_rows" in out["disassemble"][1] and "LDG" in out["disassemble"][1]
    roofline = out["roofline"][1]
    assert "DRAM" in roofline and "arithmetic intensity" in roofline and "memory-bound" in roofline
    [ceilings] = list((tmp_path / "cache" / "ceilings").glob("cuda-*.json"))
    measured = json.loads(ceilings.read_text())
    assert measured["dram_gbps"] > 500 and measured["tensor_bf16_tflops"] > measured["fp32_tflops"] > 1
    assert measured["l2_gbps"] > measured["dram_gbps"]  # an L2 figure below DRAM measures something else
