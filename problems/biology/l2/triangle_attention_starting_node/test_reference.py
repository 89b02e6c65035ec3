"""Cross-checks for biology/l2/triangle_attention_starting_node: Alg. 13 in NumPy float64 loops."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_triangle_attention(z, pair_mask, **w):
    p = {k: v.double().numpy() for k, v in w.items()}
    z, mask = z.double().numpy(), pair_mask.double().numpy()
    mu = z.mean(-1, keepdims=True)
    x = (z - mu) / np.sqrt(((z - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * p["ln_w"] + p["ln_b"]
    q, k, v = x @ p["w_q"].T, x @ p["w_k"].T, x @ p["w_v"].T
    bias = x @ p["w_b"].T                                             # [B, j, k, H]
    gate = 1 / (1 + np.exp(-(x @ p["w_g"].T + p["b_g"])))
    o = np.zeros_like(q)
    n = z.shape[1]
    for b in range(z.shape[0]):
        for i in range(n):
            for h in range(ref.HEADS):
                c = slice(h * ref.C_HEAD, (h + 1) * ref.C_HEAD)
                for j in range(n):  # a_ijk = softmax_k(q_ij . k_ik / sqrt(c) + b_jk), keys masked by mask_ik
                    lg = k[b, i, :, c] @ q[b, i, j, c] / np.sqrt(ref.C_HEAD) + bias[b, j, :, h] + 1e9 * (mask[b, i] - 1)
                    e = np.exp(lg - lg.max())
                    o[b, i, j, c] = (e / e.sum()) @ v[b, i, :, c]
    return torch.from_numpy((gate * o) @ p["w_o"].T + p["b_o"])


def test_matches_numpy_float64():
    case.check_against({"batch": 2, "n_res": 7}, numpy_triangle_attention)


def test_padded_keys_are_ignored():
    shape = {"batch": 1, "n_res": 10}
    z, mask = case.problem.inputs(shape, 0, "cpu")
    mask[:, :, -2:] = 0
    model = ref.Model(**case.problem.init_inputs(shape))
    z2 = z.clone()
    z2[:, :, -2:] += 3.0  # only masked keys (and their own query rows j = -2, -1) change
    torch.testing.assert_close(model(z, mask)[:, :, :-2], model(z2, mask)[:, :, :-2], atol=1e-5, rtol=1e-5)


def test_degeneracy():
    weights = [k for k in case.problem.init_inputs({}) if k.startswith("w_") or k == "ln_w"]
    case.check_degeneracy({"batch": 1, "n_res": 12}, init_perturbable=weights)


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_res": 48}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
