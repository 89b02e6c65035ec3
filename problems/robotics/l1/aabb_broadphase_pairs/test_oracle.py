"""The oracle tests its x-sweep candidates in launches of CANDIDATES_PER_LAUNCH (one int64 pair
slot each): at the largest shapes the sweep yields ~1e10 candidates, which as one buffer asked
the H200 for 121 GiB. Chunked launches must give exactly the reference's pairs. The checks run
the oracle under the Triton interpreter in a child process (TRITON_INTERPRET must not leak into
the other tests of the session, which compile kernels for sm_90)."""
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def load_oracle():
    spec = importlib.util.spec_from_file_location("aabb_oracle", Path(__file__).parent / "solutions" / "oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep_candidates(lo, hi):
    lo_x = torch.sort(lo[:, 0]).values
    end = torch.searchsorted(lo_x, hi[torch.argsort(lo[:, 0], stable=True), 0].contiguous(), right=True)
    return int((end - torch.arange(1, lo.shape[0] + 1)).clamp(min=0).sum())


def check_chunked_launches_match_reference() -> None:
    oracle = load_oracle()
    for seed, (shape, chunk) in enumerate((({"n_boxes": 3000, "mean_extent": 0.03, "size_sigma": 2.0}, 70001),
                                           ({"n_boxes": 5000, "mean_extent": 0.02, "size_sigma": 1.0}, 3 * 65536))):
        inputs, expected = case.run(shape, seed=seed)
        assert math.ceil(sweep_candidates(*inputs) / chunk) >= 2, "the shape must need several launches"
        oracle.CANDIDATES_PER_LAUNCH = chunk
        assert torch.equal(oracle.ModelNew()(*inputs), expected), shape


def check_no_overlap_gives_empty_pairs() -> None:
    lo = torch.tensor([[0.0, 0, 0], [2, 2, 2], [4, 4, 4]])
    pairs = load_oracle().ModelNew()(lo, lo + 1)
    assert pairs.shape == (0, 2) and pairs.dtype == torch.int64


def run_interpreted(check: str) -> None:
    repo = Path(__file__).resolve().parents[4]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo)}
    run = subprocess.run([sys.executable, __file__, check], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]


def test_chunked_launches_match_reference():
    run_interpreted("check_chunked_launches_match_reference")


def test_no_overlap_gives_empty_pairs():
    run_interpreted("check_no_overlap_gives_empty_pairs")


if __name__ == "__main__":
    globals()[sys.argv[1]]()
