"""Cross-checks for graph/l1/uniform_random_walks: Python big-integer hashing loop, uniformity."""
import scipy.stats
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
M32 = 0xFFFFFFFF


def _hash32(x: int) -> int:  # lowbias32 (C. Wellons) on Python ints
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def _cb_u32(seed: int, *ctr: int) -> int:
    h = _hash32(seed & M32)
    for c in ctr:
        h = _hash32(((h + 0x9E3779B9) & M32) ^ (c & M32))
    return h


def python_walks(rowptr, col, starts, seed, walk_length):
    rowptr, col, seed = rowptr.tolist(), col.tolist(), int(seed)
    out = []
    for w, v in enumerate(starts.tolist()):
        walk = [v]
        for t in range(walk_length):
            d = rowptr[v + 1] - rowptr[v]
            if d > 0:
                v = col[rowptr[v] + ((_cb_u32(seed, w, t) * d) >> 32)]
            walk.append(v)
        out.append(walk)
    return torch.tensor(out)


def test_matches_python_loop():
    case.check_against({"n": 3000, "avg_degree": 8, "n_walks": 300, "walk_length": 15}, python_walks)


def test_steps_follow_edges_and_sinks_hold():
    inputs, walks = case.run(case.small_shape())
    rowptr, col = inputs[0], inputs[1]
    n = rowptr.numel() - 1
    edges = set((torch.repeat_interleave(torch.arange(n), rowptr[1:] - rowptr[:-1]) * n + col).tolist())
    a, b = walks[:, :-1].reshape(-1), walks[:, 1:].reshape(-1)
    sink = (rowptr[a + 1] - rowptr[a]) == 0
    assert bool((a[sink] == b[sink]).all()) and int(sink.sum()) > 0
    assert all(k in edges for k in (a[~sink] * n + b[~sink]).tolist())


def test_neighbour_choice_is_uniform():
    # many walks from one vertex of degree d: the first step's counts are uniform over its d neighbours
    rowptr = torch.tensor([0, 7] + [7] * 7)
    col = torch.arange(1, 8)
    walks = case.problem.module.Model(1)(rowptr, col, torch.zeros(70000, dtype=torch.long), torch.tensor(12345))
    counts = torch.bincount(walks[:, 1], minlength=8)[1:]
    assert scipy.stats.chisquare(counts.numpy()).pvalue > 1e-3


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
