"""Cross-checks for probability/l1/mmd_rbf_unbiased: SciPy cdist in float64, a pair loop, unbiasedness."""
import math

import numpy as np
import torch
from scipy.spatial.distance import cdist

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def numpy_mmd(X, Y, bandwidths):
    x, y, s = X.double().numpy(), Y.double().numpy(), bandwidths.double().numpy()
    n, m = len(x), len(y)
    out = []
    for sigma in s:
        kxx, kyy, kxy = (np.exp(-cdist(a, b, "sqeuclidean") / (2 * sigma**2)) for a, b in ((x, x), (y, y), (x, y)))
        out.append((kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
                   - 2 * kxy.mean())
    out = np.array(out)
    return torch.from_numpy(out), torch.tensor(out.sum())


def test_matches_scipy_float64():
    case.check_against(case.small_shape(), numpy_mmd)


def test_matches_pair_loop():
    gen = torch.Generator().manual_seed(2)
    X, Y = torch.randn(6, 2, generator=gen), torch.randn(5, 2, generator=gen) + 0.5
    sigma = 0.9
    k = lambda a, b: math.exp(-float(((a - b) ** 2).sum()) / (2 * sigma**2))
    xx = sum(k(X[i], X[j]) for i in range(6) for j in range(6) if i != j) / 30
    yy = sum(k(Y[i], Y[j]) for i in range(5) for j in range(5) if i != j) / 20
    xy = sum(k(X[i], Y[j]) for i in range(6) for j in range(5)) / 30
    mmd2, total = case.problem.module.Model()(X, Y, torch.tensor([sigma]))
    assert abs(float(mmd2[0]) - (xx + yy - 2 * xy)) < 1e-6 and float(total) == float(mmd2[0])


def test_unbiased_for_one_distribution():
    gen = torch.Generator().manual_seed(4)
    draws = [case.problem.module.Model()(torch.randn(200, 3, generator=gen), torch.randn(200, 3, generator=gen),
                                         torch.tensor([1.0]))[0][0] for _ in range(20)]
    assert abs(float(torch.stack(draws).mean())) < 3e-3


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n": 1024, "dim": 16, "n_bandwidths": 3})
