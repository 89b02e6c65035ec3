"""scripts/gpu/launch_bound.py: the GPU-busy measure of a reference (its GPU run is in docs/verification.md)."""
import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.runner.shapes import default_shape
from orchestrator.testing import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu" / "launch_bound.py"


def _module():
    return load_script(SCRIPT, "launch_bound")


def test_overlapping_device_intervals_count_once():
    lb = _module()
    assert lb.merged_length([]) == 0
    assert lb.merged_length([(0, 10), (20, 25)]) == 15
    assert lb.merged_length([(0, 10), (5, 15), (12, 14), (30, 31)]) == 16  # streams overlap: 0-15, 30-31
    assert lb.merged_length([(5, 15), (0, 10)]) == 15  # order does not matter


def test_a_gpu_idle_more_than_half_the_call_is_launch_bound():
    lb = _module()
    assert lb.verdict(0.2) == "launch-bound" and lb.verdict(0.49) == "launch-bound"
    assert lb.verdict(0.5) == "gpu-bound" and lb.verdict(0.97) == "gpu-bound"


def test_one_problem_row_on_the_cpu(tmp_path):
    env = {**os.environ, "DEVICE": "cpu", "OUT": str(tmp_path)}
    params = json.loads((REPO / "problems/graph/l1/csr_spmv/manifest.json").read_text())["shapes"]
    for changes in ({}, {"n_rows": 512}):
        out = subprocess.run([sys.executable, str(SCRIPT), "one", str(REPO / "problems/graph/l1/csr_spmv"),
                              json.dumps(changes)], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        row = json.loads(out.stdout.strip().splitlines()[-1])
        assert row["median_ms"] > 0 and row["gpu_busy_ms"] == 0 and row["kernels"] == 0
        assert row["shape"] == {**default_shape(params, "cpu"), **changes}


def test_a_problem_may_be_measured_at_several_candidate_shapes():
    lb = _module()
    assert lb.shape_changes("chains=32768,steps=50,cutoff=1.1") == {"chains": 32768, "steps": 50, "cutoff": 1.1}
    picked = lb.problems(["graph/l1/csr_spmv", "graph/l1/csr_spmv@n_rows=5000", "graph/l1/csr_spm?@avg_degree=8"])
    assert [(e.id, c) for e, c in picked] == [("graph/l1/csr_spmv", {}), ("graph/l1/csr_spmv", {"n_rows": 5000}),
                                             ("graph/l1/csr_spmm", {"avg_degree": 8}),
                                             ("graph/l1/csr_spmv", {"avg_degree": 8})]


def test_reference_ops_counts_kernels_not_views():
    import torch

    module = load_script(REPO / "scripts" / "reference_ops.py", "reference_ops")
    a = torch.arange(6.0).reshape(2, 3)
    with module.OpCounter() as counter:
        (a.reshape(3, 2).t().unsqueeze(0) * 2).sum()
    assert counter.counts == {"mul": 1, "sum": 1}  # views launch nothing
    with module.OpCounter() as counter:
        a.t().reshape(-1)
    assert sum(counter.counts.values()) == 1  # flattening a transpose copies: one kernel
