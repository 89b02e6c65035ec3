"""Cross-checks for biology/l3/md_langevin_simulation: float64 NumPy BAOAB with per-particle force loops."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_forces(x: np.ndarray, box: float) -> tuple[np.ndarray, float]:
    forces = np.zeros_like(x)
    energy = 0.0
    shift = 4 * (ref.R_CUT ** -12 - ref.R_CUT ** -6)
    for i in range(x.shape[0]):
        for j in range(x.shape[0]):
            if i == j:
                continue
            d = x[i] - x[j]
            d -= box * np.round(d / box)
            r2 = float(d @ d)
            if r2 < ref.R_CUT ** 2:
                inv6 = r2 ** -3
                forces[i] += (48 * inv6 * inv6 - 24 * inv6) / r2 * d
                energy += 0.5 * (4 * (inv6 * inv6 - inv6) - shift)
    return forces, energy


def numpy_baoab(x0, v0, box, noise):
    x, v, box, noise = x0.double().numpy(), v0.double().numpy(), float(box), noise.double().numpy()
    c1 = math.exp(-ref.GAMMA * ref.DT)
    c2 = math.sqrt(1 - c1 * c1) * math.sqrt(ref.KT)
    f, _ = numpy_forces(x, box)
    energies = []
    for xi in noise:
        v = v + 0.5 * ref.DT * f
        x = x + 0.5 * ref.DT * v
        v = c1 * v + c2 * xi
        x = x + 0.5 * ref.DT * v
        f, e = numpy_forces(x, box)
        v = v + 0.5 * ref.DT * f
        energies.append(e)
    return torch.from_numpy(x), torch.from_numpy(v), torch.tensor(energies)


def test_matches_numpy_loops():
    case.check_against({"n_particles": 108, "n_steps": 4, "density": 0.8}, numpy_baoab)


def test_newton_third_law_and_cutoff_shift():
    x0, _, box, _ = case.problem.inputs({"n_particles": 200, "n_steps": 1, "density": 0.6}, 0, "cpu")
    f, _ = ref.lj_forces(x0.double(), box.double())
    assert float(f.sum(0).abs().max()) < 1e-9 * float(f.abs().max())
    # two particles just inside and just outside the cutoff: shifted energy ~0 and exactly 0
    pair = torch.tensor([[0.0, 0.0, 0.0], [ref.R_CUT - 1e-6, 0.0, 0.0]], dtype=torch.float64)
    _, e_in = ref.lj_forces(pair, torch.tensor(10.0, dtype=torch.float64))
    _, e_out = ref.lj_forces(pair * (1 + 1e-5), torch.tensor(10.0, dtype=torch.float64))
    assert abs(float(e_in)) < 1e-5 and float(e_out) == 0.0


def test_inputs_fill_the_box_without_overlaps():
    x0, v0, box, noise = case.problem.inputs({"n_particles": 500, "n_steps": 3, "density": 0.8}, 1, "cpu")
    assert abs(float(box) ** 3 * 0.8 - 500) < 1e-2
    d = x0[:, None] - x0[None]
    d = d - box * torch.round(d / box)
    r = d.norm(dim=-1) + torch.eye(500) * 10
    assert float(r.min()) > 0.8 and float(v0.mean(0).abs().max()) < 1e-5 and noise.shape == (3, 500, 3)


def test_degeneracy():
    case.check_degeneracy({"n_particles": 256, "n_steps": 10, "density": 0.8})


def test_tolerance_calibrated():
    case.check_calibration({"n_particles": 300, "n_steps": 100, "density": 0.8})
