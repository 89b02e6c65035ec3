"""Cross-checks for robotics/l3/bundle_adjustment_schur: full sparse normal equations, finite differences."""
import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import torch
from scipy.spatial.transform import Rotation

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
module = case.problem.module
SMALL_SHAPE = {"n_cams": 16, "n_points": 1500, "obs_per_point": 4}
CALIBRATION_SHAPE = {"n_cams": 32, "n_points": 5000, "obs_per_point": 6}


def numpy_residuals(cameras, f, points, cam, pt, uv):
    R = Rotation.from_rotvec(cameras[cam, :3]).as_matrix()
    xc = np.einsum("mij,mj->mi", R, points[pt]) + cameras[cam, 3:]
    return f * xc[:, :2] / xc[:, 2:] - uv


def perturbed(cameras, points, d_cam, d_pt):
    """Left perturbation: Exp(d_omega) R, t + d_t; X + d_X."""
    rot = Rotation.from_rotvec(d_cam[:, :3]) * Rotation.from_rotvec(cameras[:, :3])
    return np.hstack([rot.as_rotvec(), cameras[:, 3:] + d_cam[:, 3:]]), points + d_pt


def full_normal_equations_step(cameras, focal, points, cam, pt, uv, pairs, mu):
    cameras, points, uv = (t.double().numpy() for t in (cameras, points, uv))
    cam, pt, f, mu = cam.numpy(), pt.numpy(), float(focal), float(mu)
    C, P, M = len(cameras), len(points), len(cam)
    r = numpy_residuals(cameras, f, points, cam, pt, uv).reshape(-1)
    rows, cols, vals = [], [], []
    h = 1e-6
    for k in range(6):                                   # each residual depends on one camera: perturb all at once
        d = np.zeros((C, 6))
        d[:, k] = h
        plus = numpy_residuals(*perturbed(cameras, points, d, 0)[:1], f, points, cam, pt, uv)
        minus = numpy_residuals(*perturbed(cameras, points, -d, 0)[:1], f, points, cam, pt, uv)
        rows.append(np.arange(2 * M))
        cols.append(np.repeat(6 * cam + k, 2))
        vals.append(((plus - minus) / (2 * h)).reshape(-1))
    for k in range(3):
        d = np.zeros((P, 3))
        d[:, k] = h
        plus = numpy_residuals(cameras, f, points + d, cam, pt, uv)
        minus = numpy_residuals(cameras, f, points - d, cam, pt, uv)
        rows.append(np.arange(2 * M))
        cols.append(np.repeat(6 * C + 3 * pt + k, 2))
        vals.append(((plus - minus) / (2 * h)).reshape(-1))
    J = scipy.sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                shape=(2 * M, 6 * C + 3 * P))
    H = (J.T @ J + mu * scipy.sparse.identity(6 * C + 3 * P)).tocsc()
    delta = scipy.sparse.linalg.spsolve(H, -(J.T @ r))
    new_cameras, new_points = perturbed(cameras, points, delta[:6 * C].reshape(C, 6), delta[6 * C:].reshape(P, 3))
    r_new = numpy_residuals(new_cameras.astype(np.float32).astype(np.float64), f,
                            new_points.astype(np.float32).astype(np.float64), cam, pt, uv)
    cost = [0.5 * (r * r).sum(), 0.5 * (r_new * r_new).sum()]
    return torch.from_numpy(new_cameras), torch.from_numpy(new_points), torch.tensor(cost)


def test_matches_full_sparse_normal_equations():
    case.check_against(SMALL_SHAPE, full_normal_equations_step)


def test_analytic_jacobians_match_finite_differences():
    inputs, _ = case.run({"n_cams": 16, "n_points": 200, "obs_per_point": 3}, dtype=torch.float64)
    cameras, focal, points, cam, pt, uv = inputs[:6]
    _, J_c, J_p = module.residuals_and_jacobians(cameras, focal, points, cam, pt, uv)
    h = 1e-6
    for k in range(6):
        d = torch.zeros(6, dtype=torch.float64)
        d[k] = h
        moved = [torch.cat([module.so3_log(module.so3_exp(s * d[:3]) @ module.so3_exp(cameras[:, :3])),
                            cameras[:, 3:] + s * d[3:]], -1) for s in (1, -1)]
        fd = (module.residuals_and_jacobians(moved[0], focal, points, cam, pt, uv)[0]
              - module.residuals_and_jacobians(moved[1], focal, points, cam, pt, uv)[0]) / (2 * h)
        torch.testing.assert_close(J_c[..., k], fd, atol=1e-5, rtol=1e-6)
    for k in range(3):
        d = torch.zeros(3, dtype=torch.float64)
        d[k] = h
        fd = (module.residuals_and_jacobians(cameras, focal, points + d, cam, pt, uv)[0]
              - module.residuals_and_jacobians(cameras, focal, points - d, cam, pt, uv)[0]) / (2 * h)
        torch.testing.assert_close(J_p[..., k], fd, atol=1e-5, rtol=1e-6)


def test_step_reduces_the_cost_towards_the_noise_floor():
    inputs, (_, _, cost) = case.run(SMALL_SHAPE)
    observations = len(inputs[3])
    assert float(cost[0]) > 10 * float(cost[1])
    assert float(cost[1]) < 0.25 * observations * 1.5          # noise: 0.5 px per coordinate


def test_so3_log_inverts_exp():
    omega = torch.randn(1000, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    omega = omega * (3.0 * torch.rand(1000, 1, dtype=torch.float64) / omega.norm(dim=-1, keepdim=True))
    omega[:10] *= 1e-8
    torch.testing.assert_close(module.so3_log(module.so3_exp(omega)), omega, atol=1e-9, rtol=1e-9)


def test_degeneracy():
    # mu (input 7) is a small LM damping next to J^T J: its own test below shows it acts
    case.check_degeneracy(SMALL_SHAPE, perturbable=[0, 1, 2, 5])


def test_damping_shrinks_the_step():
    inputs, (cameras, points, cost) = case.run(SMALL_SHAPE)
    heavy = list(inputs)
    heavy[7] = inputs[7] * 1e4
    cameras_h, points_h, cost_h = module.Model()(*heavy)
    assert float((points_h - inputs[2]).norm()) < 0.5 * float((points - inputs[2]).norm())
    assert float(cost[1]) < float(cost_h[1]) < float(cost_h[0])


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert rel * 10 <= case.tolerance["rtol"]
    case.check_calibration(CALIBRATION_SHAPE)
