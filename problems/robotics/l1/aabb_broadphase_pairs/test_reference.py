"""Cross-checks for robotics/l1/aabb_broadphase_pairs: brute force and a hand-made scene."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def brute_force_pairs(lo, hi):
    lo, hi = lo.numpy(), hi.numpy()
    overlap = ((lo[:, None] <= hi[None]) & (lo[None] <= hi[:, None])).all(-1)
    i, j = np.nonzero(np.triu(overlap, 1))
    return torch.from_numpy(np.stack([i, j], 1).astype(np.int64))


def test_matches_brute_force():
    for seed, shape in enumerate(({"n_boxes": 3000, "mean_extent": 0.03, "size_sigma": 1.0},
                                  {"n_boxes": 2000, "mean_extent": 0.02, "size_sigma": 2.0},
                                  {"n_boxes": 2500, "mean_extent": 0.01, "size_sigma": 0.0})):
        inputs, pairs = case.run(shape, seed=seed)
        expected = brute_force_pairs(*inputs)
        assert pairs.shape == expected.shape and bool((pairs == expected).all()), shape
        assert len(pairs) > 10


def test_chunked_sweep_matches_one_chunk():
    module = case.problem.module
    inputs, pairs = case.run({"n_boxes": 3000, "mean_extent": 0.03, "size_sigma": 2.0})
    saved, module.CANDIDATES_PER_CHUNK = module.CANDIDATES_PER_CHUNK, 1000
    try:
        chunked = module.Model()(*inputs)
    finally:
        module.CANDIDATES_PER_CHUNK = saved
    assert torch.equal(chunked, pairs)


def test_touching_contained_and_separate_boxes():
    lo = torch.tensor([[0, 0, 0], [1, 0, 0], [0.2, 0.2, 0.2], [3, 3, 3], [1.0001, 0, 0]])
    hi = torch.tensor([[1, 1, 1], [2, 1, 1], [0.4, 0.4, 0.4], [4, 4, 4], [2, 0.5, 0.5]])
    pairs = case.problem.module.Model()(lo, hi)
    assert pairs.tolist() == [[0, 1], [0, 2], [1, 4]]


def test_degeneracy():
    case.check_degeneracy({"n_boxes": 10000, "mean_extent": 0.01, "size_sigma": 1.0})
