"""Cross-checks for robotics/l2/gjk_distance: an independent SciPy QP, duality bounds, analytic boxes."""
import itertools

import numpy as np
import torch
from scipy.optimize import minimize

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def qp_solution(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """min ||A^T l - B^T m|| over the two probability simplices (SLSQP): distance and the gap vector."""
    na, nb = len(a), len(b)

    def objective(x):
        diff = a.T @ x[:na] - b.T @ x[na:]
        return diff @ diff, np.concatenate([2 * a @ diff, -2 * b @ diff])

    cons = [{"type": "eq", "fun": lambda x: x[:na].sum() - 1, "jac": lambda x: np.r_[np.ones(na), np.zeros(nb)]},
            {"type": "eq", "fun": lambda x: x[na:].sum() - 1, "jac": lambda x: np.r_[np.zeros(na), np.ones(nb)]}]
    x0 = np.r_[np.full(na, 1 / na), np.full(nb, 1 / nb)]
    res = minimize(objective, x0, jac=True, bounds=[(0, 1)] * (na + nb), constraints=cons, method="SLSQP",
                   options={"ftol": 1e-16, "maxiter": 500})
    gap = b.T @ res.x[na:] - a.T @ res.x[:na]
    return float(np.sqrt(max(res.fun, 0.0))), gap


def scipy_distances(A, Bv):
    return torch.tensor([qp_solution(a, b)[0] for a, b in zip(A.double().numpy(), Bv.double().numpy())])


def test_matches_scipy_qp():
    case.check_against({"batch": 40, "n_verts": 8, "overlap_frac": 0.3}, scipy_distances)


def test_duality_bound_certifies_separated_pairs():
    """For a unit direction n, min_b n.b - max_a n.a is a lower bound on the distance; with the
    QP's gap direction it pins the GJK distance from below, the QP value from above."""
    inputs, dist = case.run({"batch": 24, "n_verts": 10, "overlap_frac": 0.3})
    A, Bv = (t.double().numpy() for t in inputs)
    separated = 0
    for a, b, d in zip(A, Bv, dist.double().tolist()):
        upper, gap = qp_solution(a, b)
        if upper < 1e-3:
            assert d < 1e-4
            continue
        n = gap / np.linalg.norm(gap)
        lower = (b @ n).min() - (a @ n).max()
        assert lower - 1e-6 <= d <= upper + 1e-6, (lower, d, upper)
        separated += 1
    assert separated > 5


def test_unit_cubes():
    corners = torch.tensor(list(itertools.product((0.0, 1.0), repeat=3)), dtype=torch.float64)
    shifts = torch.tensor([[1.5, 0.0, 0.0], [1.5, 1.5, 0.0], [0.5, 0.2, 0.1]], dtype=torch.float64)
    A = corners.expand(3, 8, 3)
    Bv = corners + shifts[:, None]
    dist = case.problem.module.Model()(A, Bv).double()
    torch.testing.assert_close(dist, torch.tensor([0.5, 0.5 * 2 ** 0.5, 0.0], dtype=torch.float64), atol=1e-7, rtol=0)


def test_degeneracy():
    case.check_degeneracy({"batch": 128, "n_verts": 8, "overlap_frac": 0.3})


def test_tolerance_calibrated():
    max_abs, rel = case.drift({"batch": 256, "n_verts": 16, "overlap_frac": 0.3})
    assert max_abs * 10 <= case.tolerance["atol"]
    case.check_calibration({"batch": 256, "n_verts": 16, "overlap_frac": 0.3})


def test_chunks_change_no_distance(monkeypatch):
    """The reference splits the batch to bound its GPU memory; pairs are independent, so a batch cut
    into uneven chunks (some ending before others converge) gives the one-piece distances, up to the
    last bits of batched float64 linear algebra (about 1e-16 at intersecting pairs, measured)."""
    shape = {"batch": 200, "n_verts": 8, "overlap_frac": 0.3}
    inputs, whole = case.run(shape)
    monkeypatch.setattr(case.problem.module, "PAIRS_PER_CHUNK", 37)
    chunked = case.problem.module.Model(**case.problem.init_inputs(shape))(*inputs)
    torch.testing.assert_close(chunked, whole, atol=1e-12, rtol=1e-12)
