"""Cross-checks for probability/l3/particle_filter_bootstrap: exact Kalman filter and a NumPy loop."""
import bisect
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_filter(y, x0, v, u):
    """Per-sequence float64 NumPy filter with Python bisect for the systematic ancestors."""
    y, x0, v, u = (t.double().numpy() for t in (y, x0, v, u))
    batch, steps = y.shape
    n = x0.shape[1]
    means = np.zeros((batch, steps))
    log_z = np.zeros(batch)
    for b in range(batch):
        x, logw = x0[b].copy(), np.full(n, -math.log(n))
        for t in range(steps):
            x = 0.5 * x + 25 * x / (1 + x * x) + 8 * math.cos(1.2 * (t + 1)) + math.sqrt(10.0) * v[t, b]
            logw = logw - 0.5 * (y[b, t] - x * x / 20) ** 2 - 0.5 * math.log(2 * math.pi)
            top = logw.max()
            lse = top + math.log(np.exp(logw - top).sum())
            log_z[b] += lse
            w = np.exp(logw - lse)
            means[b, t] = (w * x).sum()
            if 1.0 / (w * w).sum() < 0.5 * n:
                cdf = list(np.cumsum(w) / w.sum())
                ancestors = [min(bisect.bisect_right(cdf, (u[t, b] + i) / n), n - 1) for i in range(n)]
                x, logw = x[ancestors], np.full(n, -math.log(n))
            else:
                logw = logw - lse
    return torch.from_numpy(means), torch.from_numpy(log_z)


def test_matches_numpy_loop():
    case.check_against({"batch": 2, "n_particles": 1024, "T": 25}, numpy_filter)


class LinearGaussian(ref.Model):
    """The same filter on x_t = a x_{t-1} + sqrt(10) v_t, y_t = x_t + w_t: a Kalman filter is exact."""
    A = 0.9

    def transition(self, x, t):
        return self.A * x

    def observe(self, x):
        return x


def kalman(y: np.ndarray, a: float, q: float, r: float, p0: float):
    means, log_lik = np.zeros_like(y), np.zeros(y.shape[0])
    for b in range(y.shape[0]):
        m, p = 0.0, p0
        for t in range(y.shape[1]):
            m, p = a * m, a * a * p + q
            s = p + r
            log_lik[b] += -0.5 * (math.log(2 * math.pi * s) + (y[b, t] - m) ** 2 / s)
            k = p / s
            m, p = m + k * (y[b, t] - m), (1 - k) * p
            means[b, t] = m
    return means, log_lik


def test_linear_gaussian_variant_matches_kalman_filter():
    batch, n, steps = 2, 16384, 25
    gen = torch.Generator().manual_seed(11)
    state = torch.randn(batch, generator=gen, dtype=torch.float64) * math.sqrt(5.0)
    ys = []
    for _ in range(steps):
        state = LinearGaussian.A * state + math.sqrt(10.0) * torch.randn(batch, generator=gen, dtype=torch.float64)
        ys.append(state + torch.randn(batch, generator=gen, dtype=torch.float64))
    y = torch.stack(ys, 1).float()
    x0 = torch.randn(batch, n, generator=gen) * math.sqrt(5.0)
    v, u = torch.randn(steps, batch, n, generator=gen), torch.rand(steps, batch, generator=gen)
    means, log_z = LinearGaussian()(y, x0, v, u)
    exact_means, exact_log_z = kalman(y.double().numpy(), LinearGaussian.A, 10.0, 1.0, 5.0)
    err = np.abs(means.double().numpy() - exact_means)
    assert err.mean() < 0.015 and err.max() < 0.1, (err.mean(), err.max())  # Monte-Carlo error ~ N^-1/2
    assert np.abs(log_z.double().numpy() - exact_log_z).max() < 0.3


def test_resampling_happens_and_ancestors_are_systematic():
    # one step where a single particle carries all the weight: every slot must copy it
    y = torch.tensor([[0.0]])
    x0 = torch.zeros(1, 1024)
    v = torch.full((1, 1, 1024), 5.0)
    v[0, 0, 17] = -8 * math.cos(1.2) / math.sqrt(10.0)  # particle 17 lands at x = 0 = y
    means, _ = ref.Model()(y, x0, v, torch.tensor([[0.3]]))
    assert abs(float(means[0, 0])) < 1e-6


def test_insensitive_to_last_bit_rounding():
    """Float64 internals: a 1-ulp perturbation of every particle changes the outputs by < 1e-6."""
    y, x0, v, u = case.problem.inputs({"batch": 2, "n_particles": 1024, "T": 60}, 0, "cpu")
    model = ref.Model()
    m1, z1 = model(y, x0.double(), v, u)
    m2, z2 = model(y, torch.nextafter(x0.double(), torch.full_like(x0.double(), math.inf)), v, u)
    assert (m1 - m2).abs().max() < 1e-6 and (z1 - z2).abs().max() < 1e-6


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"batch": 2, "n_particles": 2048, "T": 50}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"]
    case.check_calibration(shape)
