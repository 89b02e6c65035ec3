"""Cross-checks for probability/l2/flow_matching_ode_solver: a float64 NumPy port and the RK4 order."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def numpy_sampler(x0, n_steps, w1, b1, w2, b2, w3, b3):
    """Float64 NumPy re-implementation of the velocity MLP and the RK4 loop."""
    w1, b1, w2, b2, w3, b3 = (t.double().numpy() for t in (w1, b1, w2, b2, w3, b3))
    freqs = 10000.0 ** (-np.arange(32) / 32.0)

    def silu(z):
        return z / (1.0 + np.exp(-z))

    def velocity(x, t):
        angles = 1000.0 * t * freqs
        emb = np.broadcast_to(np.concatenate([np.sin(angles), np.cos(angles)]), (x.shape[0], 64))
        h = silu(np.concatenate([x, emb], 1) @ w1.T + b1)
        h = silu(h @ w2.T + b2)
        return h @ w3.T + b3

    x, h = x0.double().numpy(), 1.0 / n_steps
    for k in range(n_steps):
        t = k * h
        k1 = velocity(x, t)
        k2 = velocity(x + h / 2 * k1, t + h / 2)
        k3 = velocity(x + h / 2 * k2, t + h / 2)
        k4 = velocity(x + h * k3, t + h)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return torch.from_numpy(x)


def test_matches_numpy_float64():
    case.check_against({"batch": 64, "dim": 5, "hidden": 64, "n_steps": 6}, numpy_sampler)


class _LinearField(case.problem.module.Model):
    """The reference's RK4 stepper on dx/dt = -x + t, whose exact flow is known."""

    def velocity(self, x, t):
        return -x + t


def _rk4_error(n_steps: int) -> float:
    init = case.problem.init_inputs({"dim": 3, "hidden": 64})
    x0 = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    x1 = _LinearField(**init)(x0, n_steps)
    exact = (x0 + 1.0) * math.exp(-1.0)  # x(t) = t - 1 + (x0 + 1) e^-t, at t = 1
    return float((x1 - exact).abs().max())


def test_rk4_is_fourth_order():
    errors = [_rk4_error(n) for n in (4, 8, 16)]
    assert errors[0] < 1e-4
    for coarse, fine in zip(errors, errors[1:]):
        assert 13.0 < coarse / fine < 19.0, errors


def test_samples_move_and_stay_finite():
    inputs, x1 = case.run(case.small_shape())
    moved = float((x1 - inputs[0]).abs().mean())
    assert torch.isfinite(x1).all() and 0.05 < moved < 5.0


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"batch": 128, "dim": 16, "hidden": 64, "n_steps": 8}
    max_abs, rel = case.drift(shape)
    assert max_abs * 100 <= case.tolerance["atol"] and rel * 100 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
