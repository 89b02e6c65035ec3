"""Cross-checks for robotics/l1/euclidean_distance_transform: SciPy EDT and a brute-force search."""
import itertools

import numpy as np
import torch
from scipy import ndimage

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
FAR = 2 ** 30


def scipy_squared_edt(occ):
    out = []
    for grid in occ.numpy():
        if not grid.any():
            out.append(np.full(grid.shape, FAR, dtype=np.int64))
            continue
        dist = ndimage.distance_transform_edt(~grid)          # distance to the nearest zero (occupied) voxel
        out.append(np.rint(dist ** 2).astype(np.int64))
    return torch.from_numpy(np.stack(out))


def test_matches_scipy_edt():
    case.check_against({"batch": 3, "side": 40, "occupancy": 0.01}, scipy_squared_edt)
    case.check_against({"batch": 1, "side": 33, "occupancy": 0.0005}, scipy_squared_edt, seed=4)
    case.check_against({"batch": 2, "side": 24, "occupancy": 0.3}, scipy_squared_edt, seed=5)


def test_matches_brute_force_pairs():
    occ = torch.zeros(1, 6, 5, 7, dtype=torch.bool)
    for x, y, z in ((0, 0, 0), (5, 4, 6), (2, 3, 1)):
        occ[0, x, y, z] = True
    d2 = case.problem.module.Model()(occ)
    cells = list(itertools.product(range(6), range(5), range(7)))
    occupied = [c for c in cells if occ[0][c]]
    for c in cells:
        expected = min(sum((a - b) ** 2 for a, b in zip(c, o)) for o in occupied)
        assert int(d2[0][c]) == expected, c


def test_empty_grid_is_sentinel():
    inputs, d2 = case.run({"batch": 2, "side": 16, "occupancy": 0.05})
    assert d2.dtype == torch.int32
    assert bool((d2[-1] == FAR).all()) and bool((d2[0] < FAR).all())
    assert bool(((d2[0] == 0) == inputs[0][0]).all())


def test_degeneracy():
    case.check_degeneracy({"batch": 2, "side": 24, "occupancy": 0.02})
