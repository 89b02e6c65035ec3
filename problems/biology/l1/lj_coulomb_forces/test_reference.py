"""Cross-checks for biology/l1/lj_coulomb_forces: NumPy float64 brute force over all pairs."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_all_pairs(pos, box, charge, atype, lj, pairs, cutoff):
    x, b, q = pos.double().numpy(), box.double().numpy(), charge.double().numpy()
    t, table = atype.numpy(), lj.double().numpy()
    n = x.shape[0]
    forces = np.zeros_like(x)
    energy = 0.0
    for i in range(n):
        r = x - x[i]
        r -= b * np.round(r / b)
        d = np.linalg.norm(r, axis=1)
        sel = (d < cutoff) & (np.arange(n) > i)
        js, rs, ds = np.nonzero(sel)[0], r[sel], d[sel]
        sig, eps = table[t[i], t[js], 0], table[t[i], t[js], 1]
        sr6 = (sig / ds) ** 6
        qq = ref.K_E * q[i] * q[js]
        energy += float((4 * eps * (sr6 * sr6 - sr6) + qq / ds).sum())
        f_j = -(4 * eps * (-12 * sr6 * sr6 + 6 * sr6) / ds - qq / ds ** 2)[:, None] * rs / ds[:, None]
        np.add.at(forces, js, f_j)
        forces[i] -= f_j.sum(0)
    return torch.from_numpy(forces), torch.tensor(energy, dtype=torch.float64)


def test_matches_brute_force():
    case.check_against({"n_atoms": 1000, "cutoff": 0.9, "n_types": 3}, numpy_all_pairs)


def test_pair_list_is_complete():
    pos, box, *_, pairs = case.problem.inputs({"n_atoms": 1500, "cutoff": 1.2, "n_types": 2}, 1, "cpu")
    d = pos.double()[:, None] - pos.double()[None]
    d = (d - box.double() * torch.round(d / box.double())).norm(dim=-1)
    iu = torch.triu_indices(1500, 1500, 1)
    want = iu[:, d[iu[0], iu[1]] < 1.3].T
    assert torch.equal(pairs.long(), want) and float(d[iu[0], iu[1]].min()) > 0.23


def test_net_force_vanishes():
    forces, _ = case.problem.module.Model(1.0)(*[t.double() if t.is_floating_point() else t
                                                 for t in case.problem.inputs(case.small_shape(), 2, "cpu")])
    assert float(forces.sum(0).abs().max()) < 1e-8 * float(forces.abs().sum())


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n_atoms": 3000, "cutoff": 1.2, "n_types": 8})
