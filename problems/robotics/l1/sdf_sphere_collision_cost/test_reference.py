"""Cross-checks for robotics/l1/sdf_sphere_collision_cost: SciPy interpolation, finite differences."""
import numpy as np
import torch
from scipy.interpolate import RegularGridInterpolator

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"grid": 64, "batch": 2048, "spheres": 64}
EPS = 0.05


def chomp_hinge(d: float) -> float:
    if d < 0:
        return -d + EPS / 2
    if d <= EPS:
        return (d - EPS) ** 2 / (2 * EPS)
    return 0.0


def scipy_cost_and_gradient(sdf, origin, voxel, centres, radii):
    sdf, origin, h = sdf.double().numpy(), origin.double().numpy(), float(voxel)
    D, H, W = sdf.shape
    axes = [origin[2] + h * np.arange(D), origin[1] + h * np.arange(H), origin[0] + h * np.arange(W)]
    interp = RegularGridInterpolator(axes, sdf, method="linear")
    low, high = origin, origin + h * (np.array([W, H, D]) - 1)
    pts = centres.double().numpy()
    r = radii.double().numpy()
    hinge = np.vectorize(chomp_hinge)

    def cost_terms(p):                                   # [B,S,3] world points -> [B,S]
        q = np.clip(p, low, high)
        return hinge(interp(q[..., ::-1].reshape(-1, 3)).reshape(p.shape[:2]) - r)

    terms = cost_terms(pts)
    step = 1e-6 * h
    grad = np.empty_like(pts)
    for k in range(3):
        dp = np.zeros(3)
        dp[k] = step
        grad[..., k] = (cost_terms(pts + dp) - cost_terms(pts - dp)) / (2 * step)
    return torch.from_numpy(terms.sum(-1)), torch.from_numpy(grad)


def test_matches_scipy_interpolation_and_finite_differences():
    case.check_against({"grid": 64, "batch": 1024, "spheres": 16}, scipy_cost_and_gradient)


def test_inputs_exercise_every_branch():
    inputs, (cost, grad) = case.run({"grid": 64, "batch": 1024, "spheres": 16})
    sdf, origin, voxel, centres, radii = inputs
    g = (centres - origin) / voxel
    assert bool(((g < 0) | (g > 63)).any()), "some centres must be clamped"
    per_axis_zero = (grad == 0) & (grad.abs().sum(-1, keepdim=True) > 0)
    assert bool(per_axis_zero.any()), "a clamped axis must give a zero gradient component"
    assert bool((cost > 0).all()) and float(cost.min()) < float(cost.max())


def test_degeneracy():
    case.check_degeneracy({"grid": 64, "batch": 1024, "spheres": 16})


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
