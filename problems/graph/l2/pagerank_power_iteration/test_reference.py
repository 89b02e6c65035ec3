"""Cross-checks for graph/l2/pagerank_power_iteration: NetworkX's Google matrix in float64, conservation."""
import networkx as nx
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def networkx_power_iteration(rowptr, col, out_degree, damping, iters):
    """K steps r <- r G with NetworkX's Google matrix (dangling rows spread uniformly), from r0 = 1/N."""
    n = rowptr.numel() - 1
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    lengths = (rowptr[1:] - rowptr[:-1]).long()
    dst = torch.repeat_interleave(torch.arange(n), lengths)
    graph.add_edges_from(zip(col.tolist(), dst.tolist()))
    google = nx.google_matrix(graph, alpha=float(damping), nodelist=range(n))
    r = np.full(n, 1.0 / n)
    prev = r
    for _ in range(iters):
        prev, r = r, np.asarray(r @ google).ravel()
    return torch.from_numpy(r), torch.tensor(np.abs(r - prev).sum())


def test_matches_networkx_google_matrix():
    case.check_against({"n": 400, "avg_degree": 6, "iters": 12, "dangling_frac": 0.2}, networkx_power_iteration)


def test_ranks_sum_to_one_and_out_degree_is_consistent():
    inputs, (r, resid) = case.run(case.small_shape())
    rowptr, col, out_degree, _ = inputs
    assert torch.equal(torch.bincount(col.long(), minlength=out_degree.numel()), out_degree.long())
    assert abs(float(r.double().sum()) - 1.0) < 1e-5 and float(resid) > 0
    assert 0.05 < float((out_degree == 0).float().mean()) < 0.2


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n": 100000, "avg_degree": 16, "iters": 36, "dangling_frac": 0.1}
    max_abs, rel = case.drift(shape)
    case.check_calibration(shape)
