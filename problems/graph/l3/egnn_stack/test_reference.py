"""Cross-checks for graph/l3/egnn_stack: dense float64 NumPy message passing, k-NN graph, E(3) symmetry."""
import math

import numpy as np
import scipy.spatial
import torch

from orchestrator.runner.compare import compare_outputs
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def _silu(v):
    return v / (1.0 + np.exp(-v))


def dense_egnn(h, x, edge_index, edge_attr, per_graph, **w):
    """All pairs (i, j), masked by a k-NN adjacency rebuilt per cloud with a KD-tree."""
    w = {k: v.double().numpy() for k, v in w.items()}
    h, x, a = h.double().numpy(), x.double().numpy(), edge_attr.double().numpy()
    n = h.shape[0]
    k = edge_index.shape[1] // n
    adj = np.zeros((n, n), dtype=bool)  # adj[i, j]: edge j -> i
    for first in range(0, n, per_graph):
        cloud = x[first:first + per_graph]
        _, nearest = scipy.spatial.cKDTree(cloud).query(cloud, k=k + 1)
        for i in range(per_graph):
            adj[first + i, [first + j for j in nearest[i] if j != i][:k]] = True
    attr = np.zeros((n, n, a.shape[1]))
    attr[edge_index[1].numpy(), edge_index[0].numpy()] = a
    for layer in range(w["edge_w1"].shape[0]):
        rel = x[:, None, :] - x[None, :, :]  # [i, j, 3]
        pair_in = np.concatenate([np.broadcast_to(h[:, None, :], (n, n, h.shape[1])),
                                  np.broadcast_to(h[None, :, :], (n, n, h.shape[1])),
                                  (rel ** 2).sum(-1, keepdims=True), attr], axis=-1)
        m = _silu(_silu(pair_in @ w["edge_w1"][layer] + w["edge_b1"][layer]) @ w["edge_w2"][layer]
                  + w["edge_b2"][layer])
        s = _silu(m @ w["coord_w1"][layer] + w["coord_b1"][layer]) @ w["coord_w2"][layer]  # [i, j]
        mask = adj.astype(np.float64)
        x = x + (mask[:, :, None] * rel * s[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        m_sum = (mask[:, :, None] * m).sum(1)
        hidden = _silu(np.concatenate([h, m_sum], -1) @ w["node_w1"][layer] + w["node_b1"][layer])
        h = h + hidden @ w["node_w2"][layer] + w["node_b2"][layer]
    return torch.from_numpy(h), torch.from_numpy(x)


def test_matches_dense_numpy():
    shape = {"n_graphs": 3, "nodes_per_graph": 20, "n_layers": 2, "feat": 16, "edge_attr_dim": 3}
    case.check_against(shape, lambda *a, **w: dense_egnn(*a, per_graph=20, **w))


def test_matches_dense_numpy_without_edge_attributes():
    shape = {"n_graphs": 2, "nodes_per_graph": 17, "n_layers": 3, "feat": 16, "edge_attr_dim": 0}
    case.check_against(shape, lambda *a, **w: dense_egnn(*a, per_graph=17, **w))


def test_equivariance():
    """Rotating and translating x rotates and translates the output x and leaves h unchanged."""
    shape = case.small_shape()
    inputs, (h_ref, x_ref) = case.run(shape, dtype=torch.float64)
    h, x, edge_index, edge_attr = inputs
    angle = 0.7
    c, s = math.cos(angle), math.sin(angle)
    rot = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    rot = rot @ torch.tensor([[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]], dtype=torch.float64)
    shift = torch.tensor([3.0, -1.0, 0.5], dtype=torch.float64)
    init = {k: v.double() for k, v in case.problem.init_inputs(shape).items()}
    with torch.no_grad():
        h_rot, x_rot = case.problem.module.Model(**init)(h, x @ rot.T + shift, edge_index, edge_attr)
    assert torch.allclose(h_rot, h_ref, atol=1e-9, rtol=1e-9)
    assert torch.allclose(x_rot, x_ref @ rot.T + shift, atol=1e-9, rtol=1e-9)


def test_knn_graph_is_sorted_and_regular():
    shape = case.small_shape()
    h, x, edge_index, _ = case.problem.inputs(shape, 0, "cpu")
    src, dst = edge_index
    assert bool((dst[1:] >= dst[:-1]).all())
    assert bool((torch.bincount(dst) == 16).all()) and not bool((src == dst).any())
    per_graph = shape["nodes_per_graph"]
    assert torch.equal(src // per_graph, dst // per_graph), "edges must stay within their cloud"


BIASES = ("edge_b1", "edge_b2", "coord_b1", "node_b1", "node_b2")


def test_degeneracy():
    # a 10% perturbation of a bias moves the output less than the TF32-level tolerance;
    # the biases are checked by removing them below
    weights = [k for k in case.problem.init_inputs(case.small_shape()) if k not in BIASES]
    case.check_degeneracy(case.small_shape(), init_perturbable=weights)


def test_every_bias_matters():
    shape = case.small_shape()
    inputs, ref = case.run(shape)
    init = case.problem.init_inputs(shape)
    for name in BIASES:
        with torch.no_grad():
            out = case.problem.module.Model(**{**init, name: torch.zeros_like(init[name])})(*inputs)
        assert not compare_outputs(out, ref, case.tolerance).passed, f"output does not depend on {name}"


def test_tolerance_calibrated():
    shape = {"n_graphs": 8, "nodes_per_graph": 64, "n_layers": 8, "feat": 128, "edge_attr_dim": 16}
    max_abs, rel = case.drift(shape)
    assert rel * 100 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
