"""Cross-checks for biology/l1/kabsch_rmsd: NumPy Kabsch with an explicit rotation, rigid-motion identity."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_rmsd_by_rotation(coords):
    """Superpose b onto a with the Kabsch rotation and measure the RMSD of the rotated coordinates."""
    x = coords.double().numpy()
    x = x - x.mean(1, keepdims=True)
    m = x.shape[0]
    out = np.zeros((m, m))
    for a in range(m):
        for b in range(m):
            u, _, vt = np.linalg.svd(x[b].T @ x[a])
            d = np.sign(np.linalg.det(u @ vt))
            rot = u @ np.diag([1.0, 1.0, d]) @ vt      # proper rotation taking b onto a
            out[a, b] = np.sqrt(((x[b] @ rot - x[a]) ** 2).sum(1).mean())
    return torch.from_numpy(out)


def test_matches_explicit_superposition():
    case.check_against({"n_conf": 20, "n_atoms": 33}, numpy_rmsd_by_rotation)


def test_rigid_copies_have_zero_rmsd_and_reflections_do_not():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 40, 3, generator=gen, dtype=torch.float64) * 5
    c, s = math.cos(0.7), math.sin(0.7)
    rot = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    mirror = torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64))
    confs = torch.cat([x, x @ rot.T + 3.0, x @ mirror])
    out = ref.Model()(confs)
    assert float(out[0, 1]) < 1e-6 and float(out[1, 0]) < 1e-6
    assert float(out[0, 2]) > 0.1  # a mirror image cannot be superposed by a proper rotation
    torch.testing.assert_close(out, out.T)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_conf": 256, "n_atoms": 128}
    max_abs, rel = case.drift(shape)
    assert rel * 10 <= case.tolerance["rel_norm_max"] * 1.5
    case.check_calibration(shape)
