"""Cross-checks for robotics/l1/occupancy_grid_raycast: a plain-Python Bresenham loop per beam."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
SMALL = {"grid": 96, "n_scans": 3, "beams": 40, "max_range": 3.0, "res": 0.05}


def bresenham(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """Cells from (x0, y0) to (x1, y1), both ends included (the classic all-octant loop)."""
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err, cells = dx + dy, []
    while True:
        cells.append((x0, y0))
        if x0 == x1 and y0 == y1:
            return cells
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


def python_raycast(grid, origins, endpoints, hit, res):
    out = grid.double().numpy().copy()
    H, W = out.shape
    r = float(res)
    for p in range(origins.shape[0]):
        x0, y0 = (math.floor(float(v) / r) for v in origins[p])
        for b in range(endpoints.shape[1]):
            x1, y1 = (math.floor(float(v) / r) for v in endpoints[p, b])
            cells = bresenham(x0, y0, x1, y1)
            for k, (cx, cy) in enumerate(cells):
                if 0 <= cx < W and 0 <= cy < H:
                    last = k == len(cells) - 1
                    out[cy, cx] += (0.875 if bool(hit[p, b]) else -0.375) if last else -0.375
    return torch.from_numpy(np.clip(out, -4, 4))


def test_matches_plain_python_bresenham():
    case.check_against(SMALL, python_raycast)
    case.check_against({**SMALL, "res": 0.03, "max_range": 4.0}, python_raycast, seed=5)   # rays leave the grid


def test_bresenham_walks_every_octant_in_max_steps():
    model = case.problem.module.Model()
    for x1, y1 in [(7, 3), (3, 7), (-3, 7), (-7, 3), (-7, -3), (-3, -7), (3, -7), (7, -3), (5, 5), (0, -6), (0, 0)]:
        grid = torch.zeros(32, 32)
        origin = torch.tensor([[16.5, 16.5]])
        end = torch.tensor([[[16.5 + x1, 16.5 + y1]]])
        out = model(grid, origin, end, torch.tensor([[True]]), torch.tensor(1.0))
        expected = torch.zeros(32, 32, dtype=torch.float64)
        cells = bresenham(16, 16, 16 + x1, 16 + y1)
        assert len(cells) == max(abs(x1), abs(y1)) + 1
        for cx, cy in cells[:-1]:
            expected[cy, cx] -= 0.375
        expected[16 + y1, 16 + x1] += 0.875
        assert torch.equal(out.double(), expected), (x1, y1)


def test_inputs_keep_off_cell_boundaries_and_mix_returns():
    grid, origins, endpoints, hit, res = case.problem.inputs(case.small_shape(), 0, "cpu")
    cells = endpoints.double() / res.double()
    frac = cells - cells.floor()
    assert float(frac.min()) >= 0.019 and float(frac.max()) <= 0.981
    assert 0.7 < float(hit.float().mean()) < 0.95
    assert bool(((grid * 8).round() == grid * 8).all()) and float(grid.abs().max()) == 4.0


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"grid": 512, "n_scans": 8, "beams": 720, "max_range": 15.0, "res": 0.03}
    max_abs, _ = case.drift(shape)
    assert max_abs == 0.0, "dyadic increments must make float32 and float64 agree bit for bit"
    case.check_calibration(shape)
