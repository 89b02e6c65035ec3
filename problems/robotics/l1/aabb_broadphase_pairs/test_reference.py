"""Cross-checks for robotics/l1/aabb_broadphase_pairs: brute force and a hand-made scene."""
import math

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


def expected_pairs_bound(shape):
    """The manifest's pair-count constraint: n^2 * extent^3 * (e^(3 sigma^2) + 3 e^(sigma^2)) bounds the
    expected pair count (overlap probabilities not clipped at 1)."""
    s = shape["size_sigma"]
    return shape["n_boxes"] ** 2 * shape["mean_extent"] ** 3 * (math.exp(3 * s * s) + 3 * math.exp(s * s))


def test_pair_count_bound_holds():
    from orchestrator.runner.shapes import evaluate
    pair_constraint = [c for c in case.manifest["constraints"] if "size_sigma" in c][0]
    for seed, shape in enumerate(({"n_boxes": 20000, "mean_extent": 0.03, "size_sigma": 0.0},
                                  {"n_boxes": 20000, "mean_extent": 0.026, "size_sigma": 1.0},
                                  {"n_boxes": 20000, "mean_extent": 0.0015, "size_sigma": 2.0})):
        bound = expected_pairs_bound(shape)
        assert evaluate(pair_constraint.replace("<= 3e7", f"<= {bound * 1.0001}"), shape)  # the same formula
        assert not evaluate(pair_constraint.replace("<= 3e7", f"<= {bound * 0.9999}"), shape)
        _, pairs = case.run(shape, seed=seed)
        assert 0 < pairs.shape[0] <= bound, (shape, pairs.shape[0], bound)
