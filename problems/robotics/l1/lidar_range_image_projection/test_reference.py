"""Cross-checks for robotics/l1/lidar_range_image_projection: a plain-Python z-buffer (math.atan2/asin)."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
SMALL = {"batch": 2, "n_points": 3000, "height": 16, "width": 128}
FOV_UP, FOV_DOWN = math.radians(3.0), math.radians(-25.0)


def python_zbuffer(points, n_valid, height, width):
    B, N, C = points.shape
    pts = points.double().numpy()
    rng = np.full((B, height, width), -1.0)
    idx = np.full((B, height, width), -1, dtype=np.int64)
    ch = np.zeros((B, C, height, width))
    for b in range(B):
        for i in range(int(n_valid[b])):           # increasing index: only a strictly closer point replaces
            x, y, z = pts[b, i, :3]
            norm = math.sqrt(x * x + y * y + z * z)
            key = float(np.float32(norm))
            u = min(max(math.floor(0.5 * (1 - math.atan2(y, x) / math.pi) * width), 0), width - 1)
            v = math.floor((1 - (math.asin(z / norm) - FOV_DOWN) / (FOV_UP - FOV_DOWN)) * height)
            v = min(max(v, 0), height - 1)
            if idx[b, v, u] == -1 or key < rng[b, v, u]:
                rng[b, v, u], idx[b, v, u], ch[b, :, v, u] = key, i, pts[b, i]
    return torch.from_numpy(rng), torch.from_numpy(idx), torch.from_numpy(ch)


def test_matches_plain_python_zbuffer():
    case.check_against(SMALL, python_zbuffer)
    inputs, ref = case.run(SMALL)
    expected = python_zbuffer(*inputs, **case.problem.init_inputs(SMALL))
    assert torch.equal(ref[1], expected[1]), "indices must agree exactly on these inputs"


def test_ties_go_to_the_lowest_index_and_padding_is_ignored():
    model = case.problem.module.Model(4, 8)
    p = torch.tensor([[[5.0, 0.0, -0.5, 0.1], [4.0, 0.0, -0.4, 0.2], [4.0, 0.0, -0.4, 0.3], [1.0, 0.0, -0.1, 0.4]]])
    rng, idx, ch = model(p, torch.tensor([3]))
    hit = idx >= 0
    assert int(hit.sum()) == 1 and int(idx[hit]) == 1            # point 3 is padding; 1 and 2 tie
    assert torch.equal(ch.permute(0, 2, 3, 1)[hit][0], p[0, 1])
    assert float(rng[hit]) == float(p[0, 1, :3].norm()) and bool((rng[~hit] == -1).all())


def test_inputs_have_duplicates_padding_and_clamped_rows():
    (points, n_valid), (rng, idx, ch) = case.run(case.small_shape())
    assert bool((n_valid < points.shape[1]).any())
    flat = points[0, : int(n_valid[0])]
    assert torch.unique(flat, dim=0).shape[0] < flat.shape[0], "duplicate returns exercise the tie rule"
    assert bool((idx[:, 0] >= 0).any() and (idx[:, -1] >= 0).any())


def _valid_variant(inputs, ref):
    """The reference output with one pixel switched to another point of the same pixel."""
    points, n_valid = inputs
    rng, idx, ch = (t.clone() for t in ref)
    H, W = idx.shape[1:]
    v, u = case.problem.module.project(points, H, W)
    for b in range(points.shape[0]):
        for i in range(int(n_valid[b])):
            k = int(idx[b, v[b, i], u[b, i]])
            if k != i and not torch.equal(points[b, i], points[b, k]):
                rng[b, v[b, i], u[b, i]] = points[b, i, :3].double().norm().float()
                idx[b, v[b, i], u[b, i]] = i
                ch[b, :, v[b, i], u[b, i]] = points[b, i]
                return rng, idx, ch
    raise AssertionError("no pixel with two points")


def test_check_output_accepts_near_answers_and_rejects_wrong_ones():
    inputs, ref = case.run(case.small_shape())
    tol = case.tolerance
    check = case.problem.module.check_output
    rng, idx, ch = ref
    assert check(inputs, (rng + 1e-6, idx, ch), ref, tol)[0]
    assert check(inputs, _valid_variant(inputs, ref), ref, tol)[0]
    assert not check(inputs, (rng + 1e-3, idx, ch), ref, tol)[0]
    bad_ch = ch.clone()
    bad_ch[0, 3, idx[0] >= 0] += 0.5
    assert not check(inputs, (rng, idx, bad_ch), ref, tol)[0]
    far = idx.clone()
    pix = torch.nonzero(idx[0] >= 0)[0]
    far[0, pix[0], pix[1]] = idx[0].flatten()[(idx[0].flatten() >= 0).nonzero()[-1]]   # a point from elsewhere
    assert not check(inputs, (rng, far, ch), ref, tol)[0]
    perm = torch.randperm(idx.numel(), generator=torch.Generator().manual_seed(0))
    assert not check(inputs, (rng, idx.flatten()[perm].reshape(idx.shape), ch), ref, tol)[0]
    model = case.problem.module.Model(**case.problem.init_inputs(case.small_shape()))
    no_padding = model(inputs[0], torch.full_like(inputs[1], inputs[0].shape[1]))
    assert not check(inputs, no_padding, ref, tol)[0], "padding points must be ignored"


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"batch": 8, "n_points": 120000, "height": 64, "width": 2048}
    _, (rng32, idx32, _) = case.run(shape)
    _, (rng64, idx64, _) = case.run(shape, dtype=torch.float64)
    same = idx32 == idx64
    assert float(same.double().mean()) >= 1 - 1e-5, "float32 keys may only flip exact float32 ties"
    err = (rng32.double() - rng64).abs()[same]
    allowed = (case.tolerance["atol"] + case.tolerance["rtol"] * rng64.abs())[same]
    assert bool((err * 10 <= allowed).all()), f"float32 range drift {float(err.max())} leaves less than a 10x margin"
    case.check_calibration(shape)
