"""Cross-checks for graph/l2/triangle_count: networkx.triangles and K4."""
import warnings

import networkx as nx
import torch

from orchestrator.testing import ProblemCase

warnings.filterwarnings("ignore", message="Sparse")
case = ProblemCase.load(__file__)


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
