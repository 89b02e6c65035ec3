"""Cross-checks for probability/l3/score_sde_pc_sampler: a NumPy float64 sampler with its own
uint32 hash, the shared cb_normal convention, and exact sampling of N(0, I) with the exact score."""
import math

import numpy as np
import torch

from orchestrator.runner.cbrng import cb_normal
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def np_hash32(x: np.ndarray) -> np.ndarray:  # lowbias32 in native uint32 (wrapping multiply)
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def np_uniform(seed: int, *counters) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = np_hash32(np.uint32(seed & 0xFFFFFFFF))
        for c in counters:
            h = np_hash32((h + np.uint32(0x9E3779B9)) ^ np.asarray(c).astype(np.uint32))
    return ((h >> np.uint32(9)).astype(np.float64) + 0.5) * 2.0**-23


def numpy_pc_sampler(x_init, seed, sigma_min, sigma_max, n_levels, **w):
    w = {k: v.double().numpy() for k, v in w.items()}
    x = x_init.double().numpy()
    batch, dim = x.shape
    rows, cols = np.arange(batch)[:, None], np.arange(dim)[None, :]

    def silu(a):
        return a / (1 + np.exp(-a))

    def score(q, sigma):
        angles = 2 * np.pi * np.log(sigma) * w["gff_w"]
        feats = np.broadcast_to(np.concatenate([np.sin(angles), np.cos(angles)]), (batch, 2 * len(angles)))
        h = silu(np.concatenate([q, feats], 1) @ w["w1"].T + w["b1"])
        h = silu(h @ w["w2"].T + w["b2"])
        h = silu(h @ w["w3"].T + w["b3"])
        return (h @ w["w_out"].T + w["b_out"]) / sigma - q / (1 + sigma**2)

    def normal(counter):
        u0, u1 = (np_uniform(int(seed), counter, rows, cols, j) for j in (0, 1))
        return np.sqrt(-2 * np.log(u0)) * np.cos(2 * np.pi * u1)

    sig = [sigma_max * (sigma_min / sigma_max) ** (i / (n_levels - 1)) for i in range(n_levels)] + [0.0]
    for i in range(n_levels):
        var_step = sig[i] ** 2 - sig[i + 1] ** 2
        x = x + var_step * score(x, sig[i]) + np.sqrt(var_step) * normal(2 * i)
        if sig[i + 1] > 0:
            g, z = score(x, sig[i + 1]), normal(2 * i + 1)
            eps = 2 * (0.16 * np.linalg.norm(z, axis=1).mean() / np.linalg.norm(g, axis=1).mean()) ** 2
            x = x + eps * g + np.sqrt(2 * eps) * z
    return x


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_pc_sampler)


def test_noise_is_the_shared_cb_normal():
    seed = torch.tensor(987654321987)
    ours = ref.box_muller_normal(seed, 7, 33, 5, torch.float32, "cpu")
    shared = cb_normal(seed, 7, torch.arange(33).view(-1, 1), torch.arange(5).view(1, -1))
    assert torch.equal(ours, shared)


def test_exact_gaussian_score_samples_the_data_distribution():
    """With the MLP's output layer zeroed, s(x, sigma) = -x / (1 + sigma^2) is the exact score of
    unit-Gaussian data under the VE SDE, so the sampler must return x ~ N(0, I)."""
    shape = {"batch": 4096, "dim": 4, "hidden": 32, "n_levels": 100}
    init = case.problem.init_inputs(shape)
    init["w_out"], init["b_out"] = torch.zeros_like(init["w_out"]), torch.zeros_like(init["b_out"])
    inputs = case.problem.inputs(shape, 3, "cpu")
    x = ref.Model(**init)(*inputs).double()
    n = x.numel()
    assert abs(float(x.mean())) < 5 / math.sqrt(n)
    assert abs(float(x.var()) - 1.0) < 0.05, float(x.var())


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"batch": 256, "dim": 32, "hidden": 128, "n_levels": 50})
