"""Cross-checks for graph/l1/jaccard_edge_similarity: networkx.jaccard_coefficient and a hand example."""
import warnings

import networkx as nx
import torch

from orchestrator.testing import ProblemCase

warnings.filterwarnings("ignore", message="Sparse")
case = ProblemCase.load(__file__)


def networkx_jaccard(rowptr, col):
    n = rowptr.numel() - 1
    deg = rowptr[1:] - rowptr[:-1]
    row = torch.repeat_interleave(torch.arange(n), deg)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(row.tolist(), col.tolist()))
    j = torch.tensor([c for _, _, c in nx.jaccard_coefficient(graph, list(zip(row.tolist(), col.tolist())))],
                     dtype=torch.float64)
    inter = (j * (deg[row] + deg[col]) / (1 + j)).round().int()
    return inter, j


def test_matches_networkx():
    case.check_against(case.small_shape(), networkx_jaccard)


def test_hand_computed():
    # triangle 0-1-2 plus the edge 2-3
    adj = {0: [1, 2], 1: [0, 2], 2: [0, 1, 3], 3: [2]}
    rowptr = torch.tensor([0, 2, 4, 7, 8])
    col = torch.tensor([c for v in range(4) for c in adj[v]])
    inter, j = case.problem.module.Model()(rowptr, col)
    assert inter.tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    assert torch.allclose(j, torch.tensor([1 / 3, 1 / 4, 1 / 3, 1 / 4, 1 / 4, 1 / 4, 0.0, 0.0]))


def test_many_edges_share_neighbours():
    inter, _ = case.run(case.small_shape())[1]
    assert 0.2 < float((inter > 0).float().mean()) < 0.95


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
