"""Cross-checks for graph/l2/gat_attention: dense masked attention in float64 NumPy."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def dense_gat(x, src, dst, W, att_src, att_dst, bias):
    """Per head, a dense N x N softmax where entry (i, j) is weighted by the count of edges j -> i."""
    x, W = x.double().numpy(), W.double().numpy()
    heads, f_head = att_src.shape
    n = x.shape[0]
    wh = (x @ W).reshape(n, heads, f_head)
    counts = np.zeros((n, n))
    np.add.at(counts, (dst.numpy(), src.numpy()), 1.0)
    out = np.empty((n, heads, f_head))
    for h in range(heads):
        a_s = wh[:, h] @ att_src[h].double().numpy()
        a_d = wh[:, h] @ att_dst[h].double().numpy()
        logits = a_d[:, None] + a_s[None, :]
        logits = np.where(logits > 0, logits, 0.2 * logits)
        logits = np.where(counts > 0, logits, -np.inf)
        weights = counts * np.exp(logits - logits.max(axis=1, keepdims=True))
        out[:, h] = (weights / weights.sum(axis=1, keepdims=True)) @ wh[:, h]
    return torch.from_numpy(out.reshape(n, heads * f_head) + bias.double().numpy())


def test_matches_dense_attention():
    case.check_against(case.small_shape(), dense_gat)


def test_hand_computed_three_nodes():
    # one head, F' = 1, W = identity: wh = x; node 0 receives from 0 (self) and twice from 1
    init = {"W": torch.eye(1), "att_src": torch.ones(1, 1), "att_dst": torch.zeros(1, 1), "bias": torch.zeros(1)}
    x = torch.tensor([[1.0], [-2.0], [3.0]])
    src = torch.tensor([0, 1, 1, 1, 2])
    dst = torch.tensor([0, 0, 0, 1, 2])
    out = case.problem.module.Model(**init)(x, src, dst).detach()
    # logits at node 0: leaky(1) = 1 once, leaky(-2) = -0.4 twice
    w_self, w_other = np.exp(1.0), 2 * np.exp(-0.4)
    expected0 = (w_self * 1.0 + w_other * -2.0) / (w_self + w_other)
    assert np.allclose(out[:, 0].numpy(), [expected0, -2.0, 3.0], atol=1e-6)


def test_inputs_are_sorted_with_self_loops():
    x, src, dst = case.problem.inputs(case.min_shape(), 0, "cpu")
    n = x.shape[0]
    assert bool((dst[1:] >= dst[:-1]).all())
    assert int((src == dst).sum()) == n and torch.equal(torch.unique(dst[src == dst]), torch.arange(n))


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n": 20000, "avg_degree": 16, "f_in": 256, "heads": 8, "f_head": 32}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} too close to atol"
    case.check_calibration(shape)
