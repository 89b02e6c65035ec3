"""Cross-checks for probability/l2/kalman_filter: a NumPy loop and the exact Gaussian marginal likelihood."""
import math

import numpy as np
import torch
from scipy.stats import multivariate_normal

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def numpy_kalman(y, obs_mask, m0, P0, F, H, Q, R):
    """Float64 per-system filter with np.linalg.solve and the standard covariance update."""
    y, mask, m0, P0 = y.double().numpy(), obs_mask.numpy(), m0.double().numpy(), P0.double().numpy()
    F, H, Q, R = (t.double().numpy() for t in (F, H, Q, R))
    batch, steps, dy = y.shape
    means, covs, logliks = np.zeros((batch, steps, m0.shape[1])), [], np.zeros(batch)
    for b in range(batch):
        m, P = m0[b], P0
        for t in range(steps):
            m, P = F @ m, F @ P @ F.T + Q
            if mask[b, t]:
                S = H @ P @ H.T + R
                K = np.linalg.solve(S, H @ P).T
                e = y[b, t] - H @ m
                logliks[b] += -0.5 * (e @ np.linalg.solve(S, e) + np.linalg.slogdet(S)[1] + dy * math.log(2 * math.pi))
                m, P = m + K @ e, (np.eye(len(m)) - K @ H) @ P
                P = 0.5 * (P + P.T)
            means[b, t] = m
        covs.append(P)
    return torch.from_numpy(means), torch.from_numpy(np.stack(covs)), torch.from_numpy(logliks)


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_kalman)


def test_loglik_is_the_exact_marginal_likelihood():
    shape = {"n_systems": 3, "T": 4, "dx": 2, "dy": 1, "missing_frac": 0.3}
    inputs = case.problem.inputs(shape, 5, "cpu")
    init = case.problem.init_inputs(shape)
    _, _, loglik = case.problem.module.Model(**init)(*inputs)
    y, mask, m0, P0 = (t.double() if t.is_floating_point() else t for t in inputs)
    F, H, Q, R = (init[k].double() for k in "FHQR")
    for b in range(3):
        # stack the observed y_t = H x_t + r_t as one Gaussian vector and evaluate its density
        mean_x, cov_x, rows_mean, blocks = m0[b], P0, [], []
        states = []
        for t in range(4):
            mean_x, cov_x = F @ mean_x, F @ cov_x @ F.T + Q
            states.append((mean_x.clone(), cov_x.clone()))
        seen = [t for t in range(4) if mask[b, t]]
        if not seen:
            assert float(loglik[b]) == 0.0
            continue
        # Cov(x_s, x_t) = F^(t-s) Cov(x_s) for s <= t
        def cross(s, t):
            return torch.linalg.matrix_power(F, t - s) @ states[s][1] if s <= t else cross(t, s).T
        mu = torch.cat([H @ states[t][0] for t in seen])
        cov = torch.cat([torch.cat([H @ cross(s, t).T @ H.T + (R if s == t else 0 * R) for t in seen], 1) for s in seen], 0)
        obs = torch.cat([y[b, t] for t in seen])
        exact = multivariate_normal(mu.numpy(), cov.numpy()).logpdf(obs.numpy())
        assert abs(float(loglik[b]) - exact) < 1e-4


def test_covariance_stays_symmetric_positive_definite():
    _, (_, P, _) = case.run({"n_systems": 256, "T": 60, "dx": 8, "dy": 3, "missing_frac": 0.5})
    assert torch.allclose(P, P.transpose(1, 2), atol=1e-6)
    assert bool((torch.linalg.eigvalsh(P.double()) > 0).all())


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_systems": 256, "T": 50, "dx": 8, "dy": 4, "missing_frac": 0.2}
    case.check_calibration(shape)
