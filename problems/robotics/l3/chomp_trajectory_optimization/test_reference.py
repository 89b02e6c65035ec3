"""Cross-checks for robotics/l3/chomp_trajectory_optimization: a NumPy/SciPy CHOMP, closed forms."""
import numpy as np
import scipy.linalg
import torch
from scipy.interpolate import RegularGridInterpolator
from scipy.spatial.transform import Rotation

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
module = case.problem.module
SMALL_SHAPE = {"batch": 16, "waypoints": 16, "iters": 10, "spheres": 8}
CALIBRATION_SHAPE = {"batch": 16, "waypoints": 32, "iters": 40, "spheres": 16}
EPS = 0.05


def numpy_sphere_centres(q, R_f, p_f, axis, link, offset):
    """[N,S,3] centres by a per-joint loop (SciPy rotations about the joint axes)."""
    N = len(q)
    R, p = np.tile(np.eye(3), (N, 1, 1)), np.zeros((N, 3))
    frames = []
    for j in range(len(R_f)):
        p = p + R @ p_f[j]
        R = R @ R_f[j] @ Rotation.from_rotvec(q[:, j:j + 1] * axis[j]).as_matrix()
        frames.append((R, p))
    return np.stack([frames[l][1] + frames[l][0] @ o for l, o in zip(link, offset)], 1)


def hinge(d):
    return np.where(d < 0, -d + EPS / 2, np.where(d <= EPS, (d - EPS) ** 2 / (2 * EPS), 0.0))


def hinge_slope(d):
    return np.where(d < 0, -1.0, np.where(d <= EPS, (d - EPS) / EPS, 0.0))


def numpy_chomp(xi, sdf, origin, voxel, R_f, p_f, axis, sphere_link, sphere_offset, sphere_radius,
                step, w_obs, iters):
    xi = xi.double().numpy().copy()
    chain = [t.double().numpy() for t in (R_f, p_f, axis)] + [sphere_link.numpy(), sphere_offset.double().numpy()]
    radius, h = sphere_radius.double().numpy(), float(voxel)
    sdf, origin = sdf.double().numpy(), origin.double().numpy()
    D, H, W = sdf.shape
    grid = [origin[2] + h * np.arange(D), origin[1] + h * np.arange(H), origin[0] + h * np.arange(W)]
    gz, gy, gx = np.gradient(sdf, h)
    value, gradient = RegularGridInterpolator(grid, sdf), [RegularGridInterpolator(grid, c) for c in (gx, gy, gz)]
    low, high = origin, origin + h * (np.array([W, H, D]) - 1)
    B, T, J = xi.shape
    n = T - 2
    bands = np.vstack([np.r_[0, -np.ones(n - 1)], 2 * np.ones(n), np.r_[-np.ones(n - 1), 0]]) * (T - 1) ** 2
    costs = []
    for _ in range(iters):
        q = xi.reshape(B * T, J)
        x = numpy_sphere_centres(q, *chain)
        jac = np.empty(x.shape + (J,))
        for k in range(J):                                 # Jacobian columns by central differences
            dq = np.zeros(J)
            dq[k] = 1e-6
            jac[..., k] = (numpy_sphere_centres(q + dq, *chain) - numpy_sphere_centres(q - dq, *chain)) / 2e-6
        x, jac = x.reshape(B, T, -1, 3), jac.reshape(B, T, -1, 3, J)
        xin = x[:, 1:-1]
        at = np.clip(xin, low, high)[..., ::-1].reshape(-1, 3)
        d = value(at).reshape(xin.shape[:-1]) - radius
        inside = (xin >= low) & (xin <= high)
        grad = hinge_slope(d)[..., None] * np.stack([f(at).reshape(xin.shape[:-1]) for f in gradient], -1) * inside
        speed = np.linalg.norm((x[:, 2:] - x[:, :-2]) / 2, axis=-1)
        grad_obs = np.einsum("btsij,btsi->btj", jac[:, 1:-1], grad * speed[..., None])
        grad_smooth = (2 * xi[:, 1:-1] - xi[:, :-2] - xi[:, 2:]) * (T - 1) ** 2
        smooth = 0.5 * (np.diff(xi, axis=1) ** 2).sum((1, 2)) * (T - 1) ** 2
        costs.append(smooth + w_obs * (hinge(d) * speed).sum((1, 2)))
        rhs = (grad_smooth + w_obs * grad_obs).transpose(1, 0, 2).reshape(n, B * J)
        update = scipy.linalg.solve_banded((1, 1), bands, rhs).reshape(n, B, J).transpose(1, 0, 2)
        xi[:, 1:-1] -= step * update
    return torch.from_numpy(xi), torch.from_numpy(np.stack(costs))


def test_matches_numpy_chomp():
    case.check_against({"batch": 4, "waypoints": 16, "iters": 10, "spheres": 8}, numpy_chomp)


def test_obstacle_free_run_contracts_to_the_straight_line():
    inputs, _ = case.run(SMALL_SHAPE, dtype=torch.float64)
    xi, sdf = inputs[0], torch.full_like(inputs[1], 10.0)          # every sphere far from obstacles
    init = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
            for k, v in case.problem.init_inputs(SMALL_SHAPE).items()}
    out, costs = module.Model(**init)(xi, sdf, *inputs[2:])
    s = torch.linspace(0, 1, xi.shape[1], dtype=torch.float64)[None, :, None]
    line = xi[:, :1] + s * (xi[:, -1:] - xi[:, :1])
    K, step = init["iters"], init["step"]
    torch.testing.assert_close(out - line, (1 - step) ** K * (xi - line), atol=1e-12, rtol=1e-10)
    smooth = 0.5 * (xi.diff(dim=1) ** 2).sum((1, 2)) * (xi.shape[1] - 1) ** 2
    torch.testing.assert_close(costs[0], smooth)


def test_obstacles_push_and_the_cost_falls():
    inputs, (xi, costs) = case.run({"batch": 16, "waypoints": 16, "iters": 30, "spheres": 8})
    assert bool((costs[-1] < costs[0]).all())
    assert bool((xi[:, 0] == inputs[0][:, 0]).all() and (xi[:, -1] == inputs[0][:, -1]).all())
    s = torch.linspace(0, 1, xi.shape[1])[None, :, None]
    line = inputs[0][:, :1] + s * (inputs[0][:, -1:] - inputs[0][:, :1])
    smooth_only = line + (1 - 0.02) ** 30 * (inputs[0] - line)
    assert float((xi - smooth_only).abs().max()) > 0.05, "the obstacle term must move some trajectory"


def test_degeneracy():
    case.check_degeneracy(SMALL_SHAPE)


def test_tolerance_calibrated():
    _, (xi32, cost32) = case.run(CALIBRATION_SHAPE)
    _, (xi64, cost64) = case.run(CALIBRATION_SHAPE, dtype=torch.float64)
    xi_drift = float((xi32.double() - xi64).abs().max())
    cost_drift = float(((cost32.double() - cost64).abs() / cost64.abs()).max())
    assert xi_drift * 10 <= case.tolerance["atol"], f"fp32 trajectory drift {xi_drift} leaves less than a 10x margin"
    assert cost_drift * 10 <= case.tolerance["rtol"], f"fp32 cost drift {cost_drift} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)


LONG_SHAPE = {"batch": 32, "waypoints": 31, "iters": 200, "spheres": 65}


def test_checker_takes_long_runs_rounding_and_refuses_missing_trajectories():
    """At the longest runs rounding grows in a few trajectories (6 of 512 past 1e-3 in float32
    against float64 at 200 iterations): the checker compares trajectories as units and lets a
    few differ, but not trajectories a kernel skipped."""
    inputs, (xi32, cost32) = case.run(LONG_SHAPE)
    _, (xi64, cost64) = case.run(LONG_SHAPE, dtype=torch.float64)
    tol = case.tolerance
    passed, message = module.check_output(inputs, (xi32, cost32), (xi64, cost64), tol)
    assert passed, message
    skipped = xi32.clone()
    skipped[:3] = 0  # three trajectories left out: more than the 2 allowed at this batch
    passed, message = module.check_output(inputs, (skipped, cost32), (xi64, cost64), tol)
    assert not passed and "trajectories agree" in message
    far = xi32.clone()
    far[:, 1:-1] += 2e-3  # every trajectory off by twice the tolerance
    assert not module.check_output(inputs, (far, cost32), (xi64, cost64), tol)[0]
