"""Cross-checks for graph/l2/triangle_count: networkx.triangles, the masked sparse product (A @ A) .* A, K4,
and a hub graph chunked at every wedge budget."""
import warnings

import networkx as nx
import pytest
import torch

from orchestrator.testing import ProblemCase

warnings.filterwarnings("ignore", message="Sparse")
pytestmark = pytest.mark.filterwarnings("ignore:Sparse")  # torch.sparse beta notices in the cross-check
case = ProblemCase.load(__file__)
ref = case.problem.module


def networkx_triangles(rowptr, col):
    n = rowptr.numel() - 1
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    row = torch.repeat_interleave(torch.arange(n), rowptr[1:] - rowptr[:-1])
    graph.add_edges_from(zip(row.tolist(), col.tolist()))
    per_node = torch.tensor([nx.triangles(graph)[v] for v in range(n)])
    return per_node, per_node.sum() // 3


def test_matches_networkx():
    case.check_against(case.small_shape(), networkx_triangles)


def test_k4_with_pendant():
    adj = {0: [1, 2, 3], 1: [0, 2, 3], 2: [0, 1, 3], 3: [0, 1, 2, 4], 4: [3]}
    rowptr = torch.tensor([0, 3, 6, 9, 13, 14])
    col = torch.tensor([c for v in range(5) for c in adj[v]])
    per_node, total = case.problem.module.Model()(rowptr, col)
    assert per_node.tolist() == [3, 3, 3, 3, 0] and int(total) == 4


def test_degree_distribution_is_skewed():
    rowptr, col = case.problem.inputs(case.small_shape(), 0, "cpu")
    deg = (rowptr[1:] - rowptr[:-1]).double()
    assert deg.max() > 10 * deg.mean()


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())


def masked_sparse_product(rowptr, col):
    """(A @ A) .* A with torch.sparse: row sums are twice the triangles through each vertex."""
    n = rowptr.numel() - 1
    a = torch.sparse_csr_tensor(rowptr, col, torch.ones(col.numel(), dtype=torch.float64), (n, n))
    common = (torch.sparse.mm(a, a).to_dense() * a.to_dense()).sum(1)
    per_node = (common / 2).round().long()
    return per_node, per_node.sum() // 3


def test_matches_masked_sparse_product():
    case.check_against({"scale": 8, "edge_factor": 32}, masked_sparse_product, seed=3)


def csr(n, edges):
    pairs = sorted({(u, v) for a, b in edges for u, v in ((a, b), (b, a))})
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(torch.tensor([u for u, _ in pairs]), minlength=n), 0)
    return rowptr, torch.tensor([v for _, v in pairs], dtype=torch.long)


def test_hub_graph_at_every_wedge_budget(monkeypatch):
    """A hub joined to every vertex of a path and of a 6-clique (the shape that broke cuSPARSE's
    A @ A on the H200, in small): wedge chunks of any size, down to one edge each, count the same."""
    path, clique = range(1, 30), range(30, 36)
    edges = [(0, v) for v in range(1, 36)] + [(v, v + 1) for v in path[:-1]]
    edges += [(a, b) for a in clique for b in clique if a < b]
    rowptr, col = csr(37, edges)  # vertex 36 is isolated
    expected = networkx_triangles(rowptr, col)
    assert int(expected[1]) == 28 + 20 + 15  # hub-path, hub-clique pair, clique-internal triangles
    for budget in (1, 2, 5, 64, 2**24):
        monkeypatch.setattr(ref, "WEDGE_CHUNK", budget)
        per_node, total = ref.Model()(rowptr, col)
        assert torch.equal(per_node, expected[0]) and int(total) == int(expected[1]), budget


def test_wedge_chunks_respect_the_budget():
    work = torch.tensor([3, 0, 4, 9, 1, 1, 2, 0])
    chunks = ref.wedge_chunks(work, 5)
    assert [c for c in chunks] == [(0, 2), (2, 3), (3, 4), (4, 8)]
    assert all(int(work[a:b].sum()) <= 5 or b - a == 1 for a, b in chunks)


def test_graph_without_edges():
    per_node, total = ref.Model()(torch.zeros(5, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    assert per_node.tolist() == [0, 0, 0, 0] and int(total) == 0
