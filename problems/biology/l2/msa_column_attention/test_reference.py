"""Cross-checks for biology/l2/msa_column_attention: a NumPy float64 loop over columns and heads."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_column_attention(m, msa_mask, **w):
    p = {k: v.double().numpy() for k, v in w.items()}
    m, mask = m.double().numpy(), msa_mask.double().numpy()
    mu = m.mean(-1, keepdims=True)
    x = (m - mu) / np.sqrt(((m - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * p["ln_w"] + p["ln_b"]
    q, k, v = x @ p["w_q"].T, x @ p["w_k"].T, x @ p["w_v"].T
    gate = 1 / (1 + np.exp(-(x @ p["w_g"].T + p["b_g"])))
    o = np.zeros_like(q)
    for b in range(m.shape[0]):
        for r in range(m.shape[2]):
            for h in range(ref.HEADS):
                c = slice(h * ref.C_HEAD, (h + 1) * ref.C_HEAD)
                lg = q[b, :, r, c] @ k[b, :, r, c].T / np.sqrt(ref.C_HEAD) + 1e9 * (mask[b, :, r][None, :] - 1)
                e = np.exp(lg - lg.max(-1, keepdims=True))
                o[b, :, r, c] = (e / e.sum(-1, keepdims=True)) @ v[b, :, r, c]
    return torch.from_numpy((gate * o) @ p["w_o"].T + p["b_o"])


def test_matches_numpy_float64():
    case.check_against({"batch": 2, "n_seq": 7, "n_res": 5}, numpy_column_attention)


def test_chunks_are_exact(monkeypatch):
    """Column chunks span batch entries (the chunk budget bounds peak memory at S = 4096, where the
    whole [B, R, H, S, S] logits needed 32 GiB on the H200): every chunk size gives the same output."""
    shape = {"batch": 2, "n_seq": 6, "n_res": 5}
    m, mask = case.problem.inputs(shape, 1, "cpu")
    model = ref.Model(**case.problem.init_inputs(shape))
    assert ref.columns_per_chunk(shape["n_seq"]) >= 10  # one chunk at the default budget
    whole = model(m, mask)
    for columns in (1, 3, 4):  # chunks that split a batch entry's residues, and cross into the next
        monkeypatch.setattr(ref, "LOGITS_BUDGET", columns * ref.HEADS * shape["n_seq"] ** 2)
        assert ref.columns_per_chunk(shape["n_seq"]) == columns
        torch.testing.assert_close(model(m, mask), whole, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(whole.double(), numpy_column_attention(m, mask, **case.problem.init_inputs(shape)),
                               atol=1e-5, rtol=1e-5)


def test_chunk_bounds_logits_at_the_largest_shape():
    """At the longest MSA one chunk's logits stay at the 1 GiB budget (float32), whatever the batch."""
    n_seq = case.manifest["shapes"]["n_seq"]["max"]
    columns = ref.columns_per_chunk(n_seq)
    assert columns >= 1 and columns * ref.HEADS * n_seq ** 2 * 4 <= 2**30


def test_degeneracy():
    weights = [k for k in case.problem.init_inputs({}) if k.startswith("w_") or k == "ln_w"]
    case.check_degeneracy({"batch": 1, "n_seq": 12, "n_res": 6}, init_perturbable=weights)


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_seq": 64, "n_res": 16}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
