"""Cross-checks for graph/l1/knn_graph: SciPy KD-tree in float64, tie handling, and check_output itself."""
import numpy as np
import scipy.spatial
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
module = case.problem.module


def kdtree_knn(pos, k):
    """k + 1 nearest points from a KD-tree (float64), the point itself dropped."""
    idx_all, d2_all = [], []
    for cloud in pos.double().numpy():
        _, nearest = scipy.spatial.cKDTree(cloud).query(cloud, k=k + 1)
        others = np.array([[j for j in row if j != i][:k] for i, row in enumerate(nearest)])
        idx_all.append(others)
        d2_all.append(((cloud[:, None, :] - cloud[others]) ** 2).sum(-1))
    return torch.from_numpy(np.stack(idx_all)), torch.from_numpy(np.stack(d2_all))


def judge(inputs, output, expected):
    return module.check_output(inputs, output, expected, case.tolerance)


def test_matches_kdtree():
    case.check_against(case.small_shape(), kdtree_knn)


def test_matches_kdtree_high_dimension():
    case.check_against({"batch": 1, "n_points": 600, "dim": 16, "k": 64}, kdtree_knn)


def test_lattice_ties_break_by_index_and_other_tie_orders_pass():
    # a 6 x 6 integer grid: the 4 axis neighbours of an interior point are all at distance 1
    grid = torch.stack(torch.meshgrid(torch.arange(6.0), torch.arange(6.0), indexing="ij"), -1).reshape(1, 36, 2)
    idx, d2 = module.Model(k=4)(grid)
    assert idx[0, 7].tolist() == [1, 6, 8, 13] and d2[0, 7].tolist() == [1.0, 1.0, 1.0, 1.0]
    swapped = idx.clone()
    swapped[0, 7] = torch.tensor([13, 8, 6, 1])
    ok, message = judge((grid,), (swapped, d2), (idx, d2))
    assert ok, message
    # point 0 (corner) has two neighbours at 1 and one at sqrt(2): the diagonal 7 is its third
    assert idx[0, 0, :3].tolist() == [1, 6, 7]


def test_check_output_rejects_wrong_answers():
    inputs, (idx, d2) = case.run(case.small_shape())
    assert judge(inputs, (idx, d2), (idx, d2))[0]
    nudged = d2 * (1 + 2e-6)  # a slightly perturbed valid answer passes
    assert judge(inputs, (idx, nudged), (idx, d2))[0]
    duplicated = idx.clone()
    duplicated[0, 5, 3] = idx[0, 5, -1] + 0  # duplicate of the k-th neighbour
    assert not judge(inputs, (duplicated, d2), (idx, d2))[0]
    wrong = idx.clone()
    wrong[1, 9, 0] = (idx[1, 9, 0] + 1) % idx.shape[1]  # another point whose distance is not d2
    if wrong[1, 9, 0] in idx[1, 9]:
        wrong[1, 9, 0] = (idx[1, 9, 0] + 2) % idx.shape[1]
    assert not judge(inputs, (wrong, d2), (idx, d2))[0]
    itself = idx.clone()
    itself[0, 3, 2] = 3
    assert not judge(inputs, (itself, d2), (idx, d2))[0]
    order = torch.randperm(idx.shape[-1], generator=torch.Generator().manual_seed(0))
    assert not judge(inputs, (idx[..., order], d2[..., order]), (idx, d2))[0], "an unsorted row passes"
    assert not judge(inputs, (idx, d2 + 1e-3), (idx, d2))[0]


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_points": 2048, "dim": 16, "k": 64}
    max_abs, rel = case.drift(shape)
    assert rel * 10 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
    case.check_calibration({"batch": 1, "n_points": 1024, "dim": 2, "k": 64})
