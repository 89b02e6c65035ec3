"""Cross-checks for graph/l3/mpnn_edge_network_gru: a float64 NumPy edge loop with explicit GRU gates."""
import numpy as np
import torch

from orchestrator.runner.compare import compare_outputs
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def numpy_mpnn(h0, edge_index, edge_attr, graph_ptr, steps, **w):
    """Messages edge by edge with A_e formed explicitly; GRU written out gate by gate (r, z, n)."""
    w = {k: v.double().numpy() for k, v in w.items()}
    h, attr = h0.double().numpy(), edge_attr.double().numpy()
    feat = h.shape[1]
    src, dst = edge_index.numpy()
    hidden = np.maximum(attr @ w["edge_w1"] + w["edge_b1"], 0.0)
    a_e = (hidden @ w["edge_w2"] + w["edge_b2"]).reshape(-1, feat, feat)
    for _ in range(steps):
        m = np.tile(w["msg_bias"], (h.shape[0], 1))
        for e in range(src.size):
            m[dst[e]] += a_e[e] @ h[src[e]]
        gi = m @ w["gru_w_ih"].T + w["gru_b_ih"]
        gh = h @ w["gru_w_hh"].T + w["gru_b_hh"]
        r = _sigmoid(gi[:, :feat] + gh[:, :feat])
        z = _sigmoid(gi[:, feat:2 * feat] + gh[:, feat:2 * feat])
        n = np.tanh(gi[:, 2 * feat:] + r * gh[:, 2 * feat:])
        h = (1.0 - z) * n + z * h
    ptr = graph_ptr.numpy()
    g = np.stack([h[ptr[i]:ptr[i + 1]].sum(0) for i in range(ptr.size - 1)])
    pred = np.maximum(g @ w["out_w1"] + w["out_b1"], 0.0) @ w["out_w2"] + w["out_b2"]
    return torch.from_numpy(h), torch.from_numpy(pred[:, 0])


def test_matches_numpy_edge_loop():
    case.check_against(case.small_shape(), numpy_mpnn)


def test_matches_numpy_edge_loop_one_step_wide():
    shape = {"n_graphs": 4, "atoms_per_graph": 9, "feat": 48, "edge_attr_dim": 5, "steps": 1}
    case.check_against(shape, numpy_mpnn)


def test_inputs_are_molecule_batches():
    h0, edge_index, edge_attr, graph_ptr = case.problem.inputs(case.small_shape(), 0, "cpu")
    src, dst = edge_index
    n = h0.shape[0]
    assert int(graph_ptr[-1]) == n and not bool((src == dst).any())
    graph_of = torch.repeat_interleave(torch.arange(graph_ptr.numel() - 1), graph_ptr[1:] - graph_ptr[:-1])
    assert torch.equal(graph_of[src], graph_of[dst]), "bonds stay within their molecule"
    key = dst * n + src
    assert bool((key[1:] > key[:-1]).all()), "edges sorted by (dst, src), no duplicates"
    reverse = torch.searchsorted(key, src * n + dst)
    assert torch.equal(key[reverse], src * n + dst), "every bond in both directions"
    assert torch.equal(edge_attr[reverse], edge_attr), "both directions share the bond's attributes"
    assert 1.8 < src.numel() / n < 2.6 and int(torch.bincount(dst, minlength=n).min()) >= 1


BIASES = ("edge_b1", "edge_b2", "msg_bias", "gru_b_ih", "gru_b_hh", "out_b1", "out_b2")


def test_degeneracy():
    # a 10% perturbation of a small bias moves the output less than the TF32-level tolerance;
    # the biases are checked by removing them below
    weights = [k for k, v in case.problem.init_inputs(case.small_shape()).items()
               if isinstance(v, torch.Tensor) and k not in BIASES]
    case.check_degeneracy(case.small_shape(), init_perturbable=weights)


def test_every_bias_and_step_matters():
    shape = case.small_shape()
    inputs, ref = case.run(shape)
    init = case.problem.init_inputs(shape)
    for name in BIASES:
        with torch.no_grad():
            out = case.problem.module.Model(**{**init, name: torch.zeros_like(init[name])})(*inputs)
        assert not compare_outputs(out, ref, case.tolerance).passed, f"output does not depend on {name}"
    with torch.no_grad():
        out = case.problem.module.Model(**{**init, "steps": shape["steps"] - 1})(*inputs)
    assert not compare_outputs(out, ref, case.tolerance).passed, "one step fewer passes"


def test_tolerance_calibrated():
    shape = {"n_graphs": 8, "atoms_per_graph": 60, "feat": 128, "edge_attr_dim": 32, "steps": 6}
    max_abs, rel = case.drift(shape)
    assert rel * 100 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
