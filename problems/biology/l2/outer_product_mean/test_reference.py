"""Cross-checks for biology/l2/outer_product_mean: explicit per-pair sums in NumPy float64."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_opm(m, msa_mask, **w):
    p = {k: v.double().numpy() for k, v in w.items()}
    m, mask = m.double().numpy(), msa_mask.double().numpy()
    mu = m.mean(-1, keepdims=True)
    x = (m - mu) / np.sqrt(((m - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * p["ln_w"] + p["ln_b"]
    a = (x @ p["w_a"].T + p["b_a"]) * mask[..., None]
    b = (x @ p["w_b"].T + p["b_b"]) * mask[..., None]
    batch, n_seq, n_res = mask.shape
    out = np.zeros((batch, n_res, n_res, p["b_o"].shape[0]))
    for bt in range(batch):
        for i in range(n_res):
            for j in range(n_res):
                outer = sum(np.outer(a[bt, s, i], b[bt, s, j]) for s in range(n_seq))
                count = 1e-3 + float((mask[bt, :, i] * mask[bt, :, j]).sum())
                out[bt, i, j] = (outer / count).reshape(-1) @ p["w_o"].T + p["b_o"]
    return torch.from_numpy(out)


def test_matches_numpy_float64():
    case.check_against({"batch": 2, "n_seq": 5, "n_res": 6}, numpy_opm)


def test_fully_masked_pair_gives_the_bias():
    shape = {"batch": 1, "n_seq": 4, "n_res": 5}
    m, mask = case.problem.inputs(shape, 0, "cpu")
    mask[:, :, 2] = 0
    init = case.problem.init_inputs(shape)
    out = ref.Model(**init)(m, mask)
    torch.testing.assert_close(out[0, 2, 2], init["b_o"])


def test_degeneracy():
    # biases and the LayerNorm shift are small: a 10% nudge stays inside the bf16-sized tolerance
    weights = [k for k in case.problem.init_inputs({}) if k.startswith("w_") or k == "ln_w"]
    case.check_degeneracy({"batch": 1, "n_seq": 8, "n_res": 8}, init_perturbable=weights)


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_seq": 32, "n_res": 32}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
