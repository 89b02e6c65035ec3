"""Cross-checks for probability/l3/enkf_lorenz96: NumPy float64 EnKF with an explicit H and gain,
energy conservation of the Lorenz-96 advection, RK4 order."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_enkf(X0, y, eps, obs_std, rk4_steps):
    X, y, eps = X0.double().numpy(), y.double().numpy(), eps.double().numpy()
    E, members, n = X.shape
    dy = n // 2
    H = np.zeros((dy, n))
    H[np.arange(dy), 2 * np.arange(dy)] = 1.0
    idx = np.arange(n)

    def f(x):
        return (x[..., (idx + 1) % n] - x[..., (idx - 2) % n]) * x[..., (idx - 1) % n] - x + 8.0

    means = []
    for c in range(y.shape[0]):
        for _ in range(rk4_steps):
            k1 = f(X)
            k2 = f(X + 0.005 * k1)
            k3 = f(X + 0.005 * k2)
            k4 = f(X + 0.01 * k3)
            X = X + 0.01 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        for e in range(E):
            mean = X[e].mean(0)
            A = 1.02 * (X[e] - mean)  # [Ne, n]
            Xe = mean + A
            P = A.T @ A / (members - 1)
            gain = P @ H.T @ np.linalg.inv(H @ P @ H.T + obs_std**2 * np.eye(dy))
            D = y[c, e] + eps[c, e]  # [Ne, dy]
            X[e] = Xe + (D - Xe @ H.T) @ gain.T
        means.append(X.mean(1))
    return np.stack(means, 1), X


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_enkf)


def test_advection_conserves_energy():
    x = torch.randn(5, 36, dtype=torch.float64)
    advection = ref.tendency(x) + x - ref.FORCING
    assert (x * advection).sum(1).abs().max() < 1e-12


def test_rk4_is_fourth_order():
    x0 = ref.FORCING + torch.randn(3, 40, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def integrate(dt: float, steps: int) -> torch.Tensor:
        saved, ref.DT = ref.DT, dt
        try:
            x = x0
            for _ in range(steps):
                x = ref.rk4_step(x)
            return x
        finally:
            ref.DT = saved

    exact = integrate(0.1 / 256, 256)
    coarse, fine = (float((integrate(0.1 / s, s) - exact).abs().max()) for s in (4, 8))
    assert 12 < coarse / fine < 20, coarse / fine


def test_filter_tracks_the_observations():
    inputs, (means, _) = case.run({"experiments": 4, "members": 64, "n_vars": 40, "cycles": 30, "rk4_steps": 5})
    innovation = means[..., ::2] - inputs[1].permute(1, 0, 2)
    assert float(innovation[:, 10:].pow(2).mean().sqrt()) < 1.2  # ~ obs_std: the analysis follows the truth


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"experiments": 4, "members": 128, "n_vars": 40, "cycles": 40, "rk4_steps": 10})


def test_checker_accepts_rounding_and_rejects_wrong_answers():
    shape = {"experiments": 10, "members": 64, "n_vars": 40, "cycles": 5, "rk4_steps": 5}
    inputs, (means, ens) = case.run(shape)
    tol = case.tolerance
    assert ref.check_output(inputs, (means * (1 + 1e-5), ens + 1e-5), (means, ens), tol)[0]
    one_off = ens.clone()
    one_off[3] += 0.5  # 1 diverged experiment of 10: the 90 % allowance
    assert ref.check_output(inputs, (means, one_off), (means, ens), tol)[0]
    two_off = one_off.clone()
    two_off[7] += 0.5
    assert not ref.check_output(inputs, (means, two_off), (means, ens), tol)[0]
    assert not ref.check_output(inputs, (means + 1e-2, ens), (means, ens), tol)[0]
    assert not ref.check_output(inputs, (means.roll(1, 1), ens), (means, ens), tol)[0]
