"""Cross-checks for probability/l2/mala_sampler: NumPy float64 chains, autograd, stationarity, the checker."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_mala(x0, xi, log_u, eps, log_w, mu, sigma):
    x, xi, log_u = x0.double().numpy(), xi.double().numpy(), log_u.double().numpy()
    log_w, mu, var = log_w.double().numpy(), mu.double().numpy(), sigma.double().numpy() ** 2
    log_norm = 0.5 * np.log(var).sum(1)

    def log_pi_and_grad(q):
        terms = log_w - 0.5 * (((q[:, None, :] - mu) ** 2) / var).sum(2) - log_norm  # [C, K]
        top = terms.max(1, keepdims=True)
        weights = np.exp(terms - top)
        total = weights.sum(1, keepdims=True)
        resp = weights / total
        return (top + np.log(total))[:, 0], (resp[:, :, None] * (mu - q[:, None, :]) / var).sum(1)

    lp, g = log_pi_and_grad(x)
    total = np.zeros_like(x)
    decisions = []
    for s in range(xi.shape[0]):
        prop = x + eps * g + math.sqrt(2 * eps) * xi[s]
        lp_new, g_new = log_pi_and_grad(prop)
        log_q_fwd = -((prop - x - eps * g) ** 2).sum(1) / (4 * eps)
        log_q_bwd = -((x - prop - eps * g_new) ** 2).sum(1) / (4 * eps)
        accept = log_u[s] < lp_new - lp + log_q_bwd - log_q_fwd
        x = np.where(accept[:, None], prop, x)
        lp = np.where(accept, lp_new, lp)
        g = np.where(accept[:, None], g_new, g)
        total += x
        decisions.append(accept)
    accepted = np.stack(decisions, 1)
    return x, accepted.mean(1), total / xi.shape[0], accepted


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_mala)


def test_gradient_matches_autograd():
    shape = {"chains": 16, "dim": 5, "n_comp": 3, "steps": 1}
    init = {k: v.double() for k, v in case.problem.init_inputs(shape).items()}
    x = case.problem.inputs(shape, 0, "cpu")[0].double().requires_grad_()
    inv_var, log_norm = 1 / init["sigma"] ** 2, init["sigma"].log().sum(1)
    log_p, grad = ref.log_density_and_grad(x, init["log_w"], init["mu"], inv_var, log_norm)
    log_p.sum().backward()
    assert torch.allclose(x.grad, grad, atol=1e-12)


def test_chains_started_in_the_target_stay_there():
    """MALA leaves pi invariant: x0 ~ pi, so the final states are exact draws of pi too."""
    shape = {"chains": 4096, "dim": 2, "n_comp": 4, "steps": 20}
    inputs, (x, rate, _, _) = case.run(shape, seed=5)
    init = {k: v.double() for k, v in case.problem.init_inputs(shape).items()}
    w, mu, var = init["log_w"].exp(), init["mu"], init["sigma"] ** 2
    mean = (w[:, None] * mu).sum(0)
    second = (w[:, None] * (var + mu * mu)).sum(0)
    target_var = second - mean * mean
    n = shape["chains"]
    assert 0.5 < float(rate.mean()) < 0.95
    assert ((x.double().mean(0) - mean).abs() < 5 * (target_var / n).sqrt()).all()
    assert ((x.double().var(0) - target_var).abs() < 6 * target_var * math.sqrt(2 / n) + 0.05 * target_var).all()


def test_checker_accepts_rounding_and_rejects_wrong_answers():
    inputs, out = case.run(case.small_shape())
    tol = case.tolerance
    x, rate, mean, accepted = out
    nudged = (x * (1 + 1e-5), rate, mean + 1e-5, accepted)
    assert ref.check_output(inputs, nudged, out, tol)[0]
    one_flip = accepted.clone()
    one_flip[3, 7] = ~one_flip[3, 7]  # 1 of 256 chains: within the 1 % allowance
    assert ref.check_output(inputs, (x, rate, mean, one_flip), out, tol)[0]
    flipped = accepted.clone()
    flipped[:8, 0] = ~flipped[:8, 0]  # 8 of 256 chains (3 %)
    assert not ref.check_output(inputs, (x, rate, mean, flipped), out, tol)[0]
    assert not ref.check_output(inputs, (x + 1e-2, rate, mean, accepted), out, tol)[0]
    assert not ref.check_output(inputs, (x, rate, mean.flip(0), accepted), out, tol)[0]


def test_degeneracy():
    case.check_degeneracy(case.small_shape(), perturbable=[0, 1, 2])


def test_tolerance_calibrated():
    case.check_calibration({"chains": 256, "dim": 32, "n_comp": 16, "steps": 80})
