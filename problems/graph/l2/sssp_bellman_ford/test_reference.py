"""Cross-checks for graph/l2/sssp_bellman_ford: scipy.sparse.csgraph.dijkstra and a hand-made graph."""
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_dijkstra(rowptr, col, weights, source):
    n = rowptr.numel() - 1
    a = scipy.sparse.csr_matrix((weights.double().numpy(), col.numpy(), rowptr.numpy()), shape=(n, n))
    return torch.from_numpy(scipy.sparse.csgraph.dijkstra(a, directed=True, indices=int(source)))


def test_matches_dijkstra():
    case.check_against(case.small_shape(), scipy_dijkstra)


def test_matches_dijkstra_on_a_sparse_graph():
    shape = {"n": 3000, "avg_degree": 2, "max_weight": 7}
    inputs, dist = case.run(shape, seed=3)
    assert bool(torch.isfinite(dist).all()), "the cycle makes every vertex reachable"
    case.check_against(shape, scipy_dijkstra, seed=3)


def test_hand_made_graph():
    # 0 -> 1 (10), 0 -> 2 (1), 2 -> 3 (1), 3 -> 1 (1), 1 -> 4 (1); vertex 5 unreachable
    edges = {0: [(1, 10.0), (2, 1.0)], 1: [(4, 1.0)], 2: [(3, 1.0)], 3: [(1, 1.0)], 4: [], 5: [(0, 1.0)]}
    rowptr = torch.tensor(np.cumsum([0] + [len(edges[v]) for v in range(6)]))
    col = torch.tensor([c for v in range(6) for c, _ in edges[v]])
    weights = torch.tensor([w for v in range(6) for _, w in edges[v]])
    dist = case.problem.module.Model()(rowptr, col, weights, torch.tensor(0))
    assert dist.tolist() == [0.0, 3.0, 1.0, 2.0, 4.0, float("inf")]


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n": 200000, "avg_degree": 8, "max_weight": 1000})
