"""Cross-checks for graph/l2/gcn_layer: scipy.sparse normalized adjacency in float64."""
import numpy as np
import scipy.sparse
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_gcn(edge_index, H, W, b):
    n = H.shape[0]
    src, dst = edge_index.numpy()
    a_hat = scipy.sparse.coo_matrix((np.ones(src.size), (dst, src)), shape=(n, n)).tocsr() + scipy.sparse.eye(n)
    d = np.asarray(a_hat.sum(axis=1)).ravel() ** -0.5
    a_norm = scipy.sparse.diags(d) @ a_hat @ scipy.sparse.diags(d)
    out = a_norm @ (H.double().numpy() @ W.double().numpy()) + b.double().numpy()
    return torch.from_numpy(np.maximum(out, 0.0))


def test_matches_scipy():
    case.check_against(case.small_shape(), scipy_gcn)


def test_matches_scipy_at_odd_sizes():
    case.check_against({"n": 157, "avg_degree": 5, "f_in": 19, "f_out": 23}, scipy_gcn, seed=4)


def test_edges_in_chunks_match_scipy(monkeypatch):
    """The reference gathers neighbour rows a chunk of edges at a time (its memory at the largest
    shapes); chunks of 7 edges must give the same layer."""
    monkeypatch.setattr(case.problem.module, "EDGE_CHUNK_ELEMENTS", 7 * 23)
    case.check_against({"n": 157, "avg_degree": 5, "f_in": 19, "f_out": 23}, scipy_gcn, seed=5)


def test_graph_is_symmetric_sorted_simple():
    edge_index, H, W, b = case.problem.inputs(case.small_shape(), 0, "cpu")
    src, dst = edge_index
    n = H.shape[0]
    assert bool((dst[1:] >= dst[:-1]).all()) and not bool((src == dst).any())
    forward, backward = set((src * n + dst).tolist()), set((dst * n + src).tolist())
    assert forward == backward and len(forward) == src.numel()


def test_relu_active_on_part_of_output():
    _, out = case.run(case.small_shape())
    zero = float((out == 0).float().mean())
    assert 0.2 < zero < 0.8


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n": 20000, "avg_degree": 20, "f_in": 256, "f_out": 128}
    max_abs, rel = case.drift(shape)
    assert max_abs * 100 <= case.tolerance["atol"], f"fp32 drift {max_abs} too close to atol"
    case.check_calibration(shape)
