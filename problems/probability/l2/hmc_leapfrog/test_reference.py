"""Cross-checks for probability/l2/hmc_leapfrog: NumPy float64 transitions, autograd, integrator properties."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_hmc(X, y, theta0, eps, momenta, log_u, leapfrog):
    X, y, theta, eps, momenta, log_u = (t.double().numpy() for t in (X, y, theta0, eps, momenta, log_u))

    def potential(q):
        z = q @ X.T
        return (np.logaddexp(0.0, z) - y * z).sum(1) + 0.5 * (q * q).sum(1)

    def grad(q):
        return (1.0 / (1.0 + np.exp(-(q @ X.T))) - y) @ X + q

    step = eps[:, None]
    samples, accepted = [], []
    for m in range(momenta.shape[0]):
        p = momenta[m]
        h0 = potential(theta) + 0.5 * (p * p).sum(1)
        q, p = theta, p - 0.5 * step * grad(theta)
        for _ in range(leapfrog - 1):
            q = q + step * p
            p = p - step * grad(q)
        q = q + step * p
        p = p - 0.5 * step * grad(q)
        accept = log_u[m] < h0 - (potential(q) + 0.5 * (p * p).sum(1))
        theta = np.where(accept[:, None], q, theta)
        samples.append(theta)
        accepted.append(accept)
    return torch.from_numpy(np.stack(samples, 1)), torch.from_numpy(np.stack(accepted, 1))


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_hmc)


def test_gradient_matches_autograd():
    X, y, theta0, *_ = case.problem.inputs(case.small_shape(), 0, "cpu")
    theta = theta0.double().requires_grad_()
    ref.potential(theta, X.double(), y.double()).sum().backward()
    assert torch.allclose(theta.grad, ref.potential_grad(theta.detach(), X.double(), y.double()), atol=1e-10)


def test_acceptance_rate_is_reasonable():
    _, (_, accepted) = case.run(case.small_shape())
    assert 0.5 < float(accepted.float().mean()) < 1.0


def test_energy_error_is_second_order():
    X, y, theta0, eps, momenta, log_u, leapfrog = case.problem.inputs(case.small_shape(), 0, "cpu")
    X, y, theta0, p0 = X.double(), y.double(), theta0.double(), momenta[0].double()

    def energy_error(step: float) -> float:
        q, p = theta0, p0 - 0.5 * step * ref.potential_grad(theta0, X, y)
        for _ in range(int(round(0.5 / step)) - 1):
            q = q + step * p
            p = p - step * ref.potential_grad(q, X, y)
        q = q + step * p
        p = p - 0.5 * step * ref.potential_grad(q, X, y)
        h0 = ref.potential(theta0, X, y) + 0.5 * (p0 * p0).sum(1)
        return float(((ref.potential(q, X, y) + 0.5 * (p * p).sum(1)) - h0).abs().mean())

    coarse, fine = energy_error(0.05), energy_error(0.025)
    assert 3.0 < coarse / fine < 5.0, (coarse, fine)


def test_degeneracy():
    case.check_degeneracy(case.small_shape(), perturbable=[0, 2, 3, 4])


def test_tolerance_calibrated():
    case.check_calibration({"chains": 64, "n_data": 1024, "dim": 16, "leapfrog": 10, "transitions": 4})
