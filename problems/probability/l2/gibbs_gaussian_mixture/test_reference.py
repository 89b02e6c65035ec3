"""Cross-checks for probability/l2/gibbs_gaussian_mixture: NumPy float64 sweeps with a NumPy
uint32 hash, Gumbel-max frequencies, the conjugate mean update."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def np_hash32(x: np.ndarray) -> np.ndarray:  # lowbias32 in native uint32 (wrapping multiply)
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def np_uniform(seed: int, *counters: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = np_hash32(np.uint32(seed & 0xFFFFFFFF))
        for c in counters:
            h = np_hash32((h + np.uint32(0x9E3779B9)) ^ np.asarray(c).astype(np.uint32))
    return ((h >> np.uint32(9)).astype(np.float64) + 0.5) * 2.0**-23


def numpy_gibbs(X, log_pi, mu0, xi, seed, sigma2, tau2):
    X, log_pi, mu, xi = (t.double().numpy() for t in (X, log_pi, mu0, xi))
    n, d = X.shape
    k = mu.shape[0]
    rows, cols = np.arange(n)[:, None], np.arange(k)[None, :]
    joints = []
    for g in range(xi.shape[0]):
        dist = ((X[:, None, :] - mu[None]) ** 2).sum(2)
        u = np_uniform(int(seed), np.uint32(g), rows, cols)
        z = np.argmax(log_pi - dist / (2 * sigma2) - np.log(-np.log(u)), 1)
        counts = np.bincount(z, minlength=k)
        sums = np.zeros((k, d))
        np.add.at(sums, z, X)
        precision = 1 / tau2 + counts / sigma2
        mu = (sums / sigma2) / precision[:, None] + xi[g] / np.sqrt(precision)[:, None]
        resid = X - mu[z]
        joints.append((log_pi[z] - (resid**2).sum(1) / (2 * sigma2)).sum() - 0.5 * n * d * math.log(2 * math.pi * sigma2)
                      - (mu**2).sum() / (2 * tau2) - 0.5 * k * d * math.log(2 * math.pi * tau2))
    return mu, z, np.array(joints)


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_gibbs)


def test_gumbel_max_samples_the_categorical_posterior():
    """Many copies of one point: the sweep's z frequencies follow pi_k N(x; mu_k, sigma^2 I)."""
    n, k, d = 40000, 5, 3
    gen = torch.Generator().manual_seed(0)
    mu = torch.randn(k, d, generator=gen, dtype=torch.float64)
    x = mu.mean(0, keepdim=True)
    log_pi = torch.log_softmax(torch.randn(k, generator=gen, dtype=torch.float64), 0)
    seed = torch.tensor(12345)
    _, z, _ = ref.Model()(x.expand(n, d).contiguous(), log_pi, mu, torch.zeros(1, k, d, dtype=torch.float64),
                          seed, 1.0, 100.0)
    expected = torch.softmax(log_pi - ((x - mu) ** 2).sum(1) / 2, 0)
    freq = torch.bincount(z, minlength=k).double() / n
    assert ((freq - expected).abs() <= 5 * (expected * (1 - expected) / n).sqrt()).all(), (freq, expected)


def test_zero_noise_gives_the_conjugate_posterior_mean():
    X, log_pi, mu0, xi, seed, sigma2, tau2 = case.problem.inputs(case.small_shape(), 0, "cpu")
    X, log_pi, mu0 = X.double(), log_pi.double(), mu0.double()
    mu, z, _ = ref.Model()(X, log_pi, mu0, torch.zeros_like(xi[:1]).double(), seed, sigma2, tau2)
    for j in range(mu0.shape[0]):
        members = X[z == j]
        expected = members.sum(0) / sigma2 / (1 / tau2 + members.shape[0] / sigma2)
        assert torch.allclose(mu[j], expected, atol=1e-12)


def test_degeneracy():
    case.check_degeneracy({"n_points": 2048, "dim": 4, "n_comp": 8, "sweeps": 5}, perturbable=[0, 1, 2, 3])


def test_tolerance_calibrated():
    case.check_calibration({"n_points": 8192, "dim": 16, "n_comp": 32, "sweeps": 10})
