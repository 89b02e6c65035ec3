"""Cross-checks for biology/l2/msa_row_attention_pair_bias: NumPy float64 loops over rows and heads."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def _ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b


def numpy_row_attention(m, z, msa_mask, **w):
    p = {k: v.double().numpy() for k, v in w.items()}
    m, z, mask = m.double().numpy(), z.double().numpy(), msa_mask.double().numpy()
    out = np.zeros_like(m)
    for b in range(m.shape[0]):
        x = _ln(m[b], p["ln_m_w"], p["ln_m_b"])                       # [S,R,cm]
        bias = _ln(z[b], p["ln_z_w"], p["ln_z_b"]) @ p["w_b"].T       # [R,R,H]
        gate = 1 / (1 + np.exp(-(x @ p["w_g"].T + p["b_g"])))
        q, k, v = x @ p["w_q"].T, x @ p["w_k"].T, x @ p["w_v"].T
        o = np.zeros_like(q)
        for s in range(m.shape[1]):
            for h in range(ref.HEADS):
                c = slice(h * ref.C_HEAD, (h + 1) * ref.C_HEAD)
                lg = q[s, :, c] @ k[s, :, c].T / np.sqrt(ref.C_HEAD) + bias[:, :, h] + 1e9 * (mask[b, s][None, :] - 1)
                e = np.exp(lg - lg.max(-1, keepdims=True))
                o[s, :, c] = (e / e.sum(-1, keepdims=True)) @ v[s, :, c]
        out[b] = (gate * o) @ p["w_o"].T + p["b_o"]
    return torch.from_numpy(out)


def test_matches_numpy_float64():
    case.check_against({"batch": 2, "n_seq": 5, "n_res": 11}, numpy_row_attention)


def test_rows_are_independent_and_chunking_is_exact():
    shape = {"batch": 1, "n_seq": ref.SEQ_CHUNK + 3, "n_res": 12}  # crosses a chunk boundary
    m, z, mask = case.problem.inputs(shape, 2, "cpu")
    model = ref.Model(**case.problem.init_inputs(shape))
    full = model(m, z, mask)
    rows = [5, ref.SEQ_CHUNK + 1]
    part = model(m[:, rows], z, mask[:, rows])
    torch.testing.assert_close(full[:, rows], part, atol=1e-6, rtol=1e-6)


def test_degeneracy():
    # biases and LayerNorm shifts are small: a 10% nudge of one stays inside the bf16-sized tolerance
    weights = [k for k in case.problem.init_inputs({}) if k.startswith("w_") or k.endswith("_w")]
    case.check_degeneracy({"batch": 1, "n_seq": 6, "n_res": 24}, init_perturbable=weights)


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_seq": 16, "n_res": 64}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
