"""Cross-checks for probability/l2/sinkhorn_log_domain: SciPy float64 loop and the marginal laws."""
import numpy as np
import torch
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def scipy_sinkhorn(x, y, log_a, log_b, eps, iters):
    eps = float(eps)
    fs, gs, costs = [], [], []
    for b in range(x.shape[0]):
        c = cdist(x[b].double().numpy(), y[b].double().numpy(), "sqeuclidean")
        la, lb = log_a[b].double().numpy(), log_b[b].double().numpy()
        f, g = np.zeros(len(la)), np.zeros(len(lb))
        for _ in range(iters):
            f = -eps * logsumexp((g[None, :] - c) / eps + lb[None, :], axis=1)
            g = -eps * logsumexp((f[:, None] - c) / eps + la[:, None], axis=0)
        plan = np.exp((f[:, None] + g[None, :] - c) / eps + la[:, None] + lb[None, :])
        fs.append(f), gs.append(g), costs.append((plan * c).sum())
    return torch.from_numpy(np.stack(fs)), torch.from_numpy(np.stack(gs)), torch.tensor(costs, dtype=torch.float64)


def plan_of(inputs, f, g):
    x, y, log_a, log_b, eps = (t.double() for t in inputs)
    c = ((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1)
    return torch.exp((f.double()[:, :, None] + g.double()[:, None, :] - c) / eps + log_a[:, :, None] + log_b[:, None, :])


def test_matches_scipy_loop():
    case.check_against(case.small_shape(), scipy_sinkhorn)


def test_matches_scipy_loop_small_eps_wide_dim():
    case.check_against({"batch": 1, "n": 200, "dim": 40, "eps": 0.02, "iters": 30}, scipy_sinkhorn, seed=3)


def test_blocked_recompute_matches_stored():
    shape = {"batch": 2, "n": 300, "dim": 5, "eps": 0.03, "iters": 12}
    inputs, stored = case.run(shape)
    limits = ref.STORE_LIMIT, ref.BLOCK_ELEMENTS
    try:
        ref.STORE_LIMIT, ref.BLOCK_ELEMENTS = 0, 2 * 300 * 5 * 37  # recompute C in row blocks of 37 rows
        blocked = ref.Model(12)(*inputs)
    finally:
        ref.STORE_LIMIT, ref.BLOCK_ELEMENTS = limits
    for a, b in zip(stored, blocked):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-6)


def test_marginals():
    """After each g update the columns of the plan sum to b exactly; with enough iterations the rows sum to a."""
    inputs, (f, g, cost) = case.run({"batch": 2, "n": 128, "dim": 2, "eps": 0.2, "iters": 300}, dtype=torch.float64)
    plan = plan_of(inputs, f, g)
    assert torch.allclose(plan.sum(1), inputs[3].exp(), atol=1e-12)
    assert torch.allclose(plan.sum(2), inputs[2].exp(), atol=1e-9)
    c = ((inputs[0][:, :, None, :] - inputs[1][:, None, :, :]) ** 2).sum(-1)
    assert torch.allclose(cost, (plan * c).sum((1, 2)), rtol=1e-12)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"batch": 2, "n": 512, "dim": 3, "eps": 0.01, "iters": 100})
    case.check_calibration({"batch": 2, "n": 256, "dim": 64, "eps": 1.0, "iters": 50}, seed=1)
