"""Cross-checks for probability/l1/kde_logsumexp: SciPy normal mixture and a cdist + logsumexp."""
import math

import numpy as np
import torch
from scipy.spatial.distance import cdist
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_logsumexp_kde(samples, queries, bandwidth):
    x, y, h = samples.double().numpy(), queries.double().numpy(), float(bandwidth)
    d2 = cdist(y, x, "sqeuclidean")
    return torch.from_numpy(logsumexp(-d2 / (2 * h * h), axis=1) - math.log(len(x))
                            - 0.5 * x.shape[1] * math.log(2 * math.pi * h * h))


def test_matches_scipy_cdist_logsumexp():
    case.check_against(case.small_shape(), scipy_logsumexp_kde)


def test_matches_mixture_of_scipy_normals():
    """The KDE is the equal-weight mixture of N(x_i, h^2 I): sum scipy.stats.multivariate_normal densities."""
    samples, queries, bandwidth = case.problem.inputs({"n_samples": 300, "n_queries": 40, "dim": 3, "bandwidth": 0.8}, 0, "cpu")
    h2 = float(bandwidth) ** 2
    y = queries.double().numpy()
    per_sample = np.stack([multivariate_normal(x, h2 * np.eye(3)).logpdf(y) for x in samples.double().numpy()])
    expected = logsumexp(per_sample, axis=0) - math.log(300)
    got = case.problem.module.Model()(samples, queries, bandwidth)
    assert np.abs(got.double().numpy() - expected).max() < 1e-4


def test_single_sample_is_a_gaussian_log_density():
    x = torch.tensor([[0.5, -1.0]])
    y = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    h = torch.tensor(0.7)
    got = case.problem.module.Model()(x, y, h)
    expected = -((y - x) ** 2).sum(1) / (2 * 0.49) - math.log(2 * math.pi * 0.49)
    assert torch.allclose(got, expected, atol=1e-5)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n_samples": 8192, "n_queries": 256, "dim": 16, "bandwidth": 0.05})
