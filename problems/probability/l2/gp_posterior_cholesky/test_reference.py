"""Cross-checks for probability/l2/gp_posterior_cholesky: dense NumPy solves and SciPy's Gaussian log-density."""
import math

import numpy as np
import torch
from scipy.stats import multivariate_normal

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def se_kernel_numpy(a, b, lengthscales, sf2):
    d2 = (((a[:, None, :] - b[None, :, :]) / lengthscales) ** 2).sum(-1)
    return sf2 * np.exp(-0.5 * d2)


def dense_gp(x, y, x_test, lengthscales, signal_var, noise_var):
    """Per task, float64: K^-1 through numpy.linalg.solve, the evidence through SciPy."""
    means, variances, lmls = [], [], []
    for g in range(x.shape[0]):
        xg, yg, sg = x[g].double().numpy(), y[g].double().numpy(), x_test[g].double().numpy()
        ls, sf2, sn2 = lengthscales[g].double().numpy(), float(signal_var[g]), float(noise_var[g])
        k = se_kernel_numpy(xg, xg, ls, sf2) + sn2 * np.eye(len(xg))
        ks = se_kernel_numpy(xg, sg, ls, sf2)
        means.append(ks.T @ np.linalg.solve(k, yg))
        variances.append(sf2 - np.einsum("ij,ij->j", ks, np.linalg.solve(k, ks)))
        lmls.append(multivariate_normal(mean=np.zeros(len(yg)), cov=k).logpdf(yg))
    return torch.from_numpy(np.stack(means)), torch.from_numpy(np.stack(variances)), torch.tensor(lmls, dtype=torch.float64)


def test_matches_dense_numpy_scipy():
    case.check_against(case.small_shape(), dense_gp)


def test_matches_dense_numpy_scipy_wide():
    case.check_against({"n_tasks": 2, "n_train": 100, "n_test": 37, "dim": 17}, dense_gp, seed=4)


def test_one_training_point_closed_form():
    """n = 1: mu = k* y / (sf2 + sn2), var = sf2 - k*^2 / (sf2 + sn2), lml = log N(y; 0, sf2 + sn2)."""
    x, y, xs = torch.tensor([[[0.2, 0.4]]]), torch.tensor([[0.7]]), torch.tensor([[[0.5, 0.1], [0.2, 0.4]]])
    ls, sf2, sn2 = torch.tensor([[0.5, 2.0]]), torch.tensor([1.3]), torch.tensor([0.1])
    mean, var, lml = ref.Model()(x, y, xs, ls, sf2, sn2)
    kstar = 1.3 * torch.exp(-0.5 * (((xs[0] - x[0]) / ls[0]) ** 2).sum(1))
    assert torch.allclose(mean[0], kstar * 0.7 / 1.4, atol=1e-6)
    assert torch.allclose(var[0], 1.3 - kstar ** 2 / 1.4, atol=1e-6)
    assert abs(float(lml[0]) - (-0.5 * 0.49 / 1.4 - 0.5 * math.log(2 * math.pi * 1.4))) < 1e-6


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n_tasks": 8, "n_train": 512, "n_test": 128, "dim": 8})
    case.check_calibration({"n_tasks": 32, "n_train": 128, "n_test": 64, "dim": 1}, seed=1)
