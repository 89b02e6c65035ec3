"""Cross-checks for robotics/l1/point_to_plane_icp_normal_equations: NumPy accumulation, known motion."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def numpy_normal_equations(src, dst, normals, weights):
    A_all, g_all, c_all, x_all = [], [], [], []
    for p, q, n, w in zip(*(t.double().numpy() for t in (src, dst, normals, weights))):
        J = np.hstack([np.cross(p, n), n])
        r = ((p - q) * n).sum(1)
        A = (J.T * w) @ J
        g = J.T @ (w * r)
        A_all.append(A)
        g_all.append(g)
        c_all.append(float((w * r * r).sum()))
        x_all.append(-np.linalg.solve(A + 1e-9 * np.eye(6), g))
    return tuple(torch.from_numpy(np.asarray(v)) for v in (A_all, g_all, c_all, x_all))


def test_matches_numpy():
    case.check_against({"batch": 3, "n_points": 5000}, numpy_normal_equations)


def test_recovers_a_small_rigid_motion():
    """dst = src - (omega x src + t) exactly: one step returns (omega, t) up to second order."""
    g = torch.Generator().manual_seed(0)
    src = torch.rand(1, 4096, 3, generator=g, dtype=torch.float64) * 2 - 1
    normals = torch.nn.functional.normalize(torch.randn(1, 4096, 3, generator=g, dtype=torch.float64), dim=-1)
    omega, t = torch.tensor([1e-4, -2e-4, 3e-4], dtype=torch.float64), torch.tensor([2e-4, 1e-4, -1e-4], dtype=torch.float64)
    dst = src + torch.linalg.cross(omega.expand_as(src), src, dim=-1) + t
    _, _, cost, x = case.problem.module.Model()(src, dst, normals, torch.ones(1, 4096, dtype=torch.float64))
    torch.testing.assert_close(x[0].double(), torch.cat([omega, t]), atol=1e-8, rtol=1e-3)
    assert float(cost) > 0


def test_degeneracy():
    case.check_degeneracy({"batch": 4, "n_points": 4096})


def test_tolerance_calibrated():
    shape = {"batch": 8, "n_points": 65536}
    max_abs, rel = case.drift(shape)
    assert rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
