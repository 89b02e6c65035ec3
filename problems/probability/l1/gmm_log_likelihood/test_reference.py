"""Cross-checks for probability/l1/gmm_log_likelihood: SciPy multivariate normals in float64."""
import numpy as np
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_gmm(X, log_weights, means, scale_tril):
    x = X.double().numpy()
    L = scale_tril.double().numpy()
    joint = np.stack([lw + multivariate_normal(mu, l @ l.T).logpdf(x)
                      for lw, mu, l in zip(log_weights.double().numpy(), means.double().numpy(), L)], 1)
    log_prob = logsumexp(joint, axis=1)
    return torch.from_numpy(log_prob), torch.from_numpy(np.exp(joint - log_prob[:, None]))


def test_matches_scipy_float64():
    case.check_against(case.small_shape(), scipy_gmm)


def test_responsibilities_sum_to_one():
    _, (_, resp) = case.run(case.small_shape())
    assert torch.allclose(resp.sum(1), torch.ones(resp.shape[0]), atol=1e-5)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n_points": 2048, "dim": 64, "n_comp": 16})


def host_bytes(s):
    """Inputs + outputs in bytes: the judge and candidate processes hold about 8x this on the host."""
    n, d, k = s["n_points"], s["dim"], s["n_comp"]
    return 4 * (n * d + k + k * d + k * d * d) + 4 * (n + n * k)


def test_stress_shapes_fit_host_memory():
    shape = case.small_shape()
    inputs, outputs = case.run(shape)
    assert host_bytes(shape) == sum(t.numel() * t.element_size() for t in (*inputs, *outputs))
    assert max(host_bytes(s) for s in case.gpu_stress_shapes()) <= 1.25 * 2**30  # the 32 GiB sandbox holds ~8x (measured)
