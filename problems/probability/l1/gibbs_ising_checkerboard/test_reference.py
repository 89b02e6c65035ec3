"""Cross-checks for probability/l1/gibbs_ising_checkerboard: a scalar loop and Onsager's magnetisation."""
import math

import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
M32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9


def lowbias32(x: int) -> int:
    """The lowbias32 finalizer on Python big integers (independent of the torch int64 version)."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def scalar_uniform(seed: int, *counters: int) -> float:
    h = lowbias32(seed & M32)
    for c in counters:
        h = lowbias32(((h + GOLDEN) & M32) ^ (c & M32))
    return ((h >> 9) + 0.5) * 2.0**-23


def scalar_gibbs(spins, p_up, seed, n_sweeps):
    """Site-by-site heat-bath sweeps with plain Python lists."""
    chains, side, _ = spins.shape
    s = spins.tolist()
    p = p_up.tolist()
    seed = int(seed)
    mags = [[0.0] * n_sweeps for _ in range(chains)]
    for c in range(chains):
        for sweep in range(n_sweeps):
            for colour in (0, 1):
                for i in range(side):
                    for j in range(side):
                        if (i + j) % 2 != colour:
                            continue
                        h = (s[c][(i - 1) % side][j] + s[c][(i + 1) % side][j]
                             + s[c][i][(j - 1) % side] + s[c][i][(j + 1) % side])
                        u = scalar_uniform(seed, c, 2 * sweep + colour, i * side + j)
                        s[c][i][j] = 1 if u < p[(h + 4) // 2] else -1
            mags[c][sweep] = sum(map(sum, s[c])) / (side * side)
    return torch.tensor(s, dtype=torch.int8), torch.tensor(mags, dtype=torch.float32)


def test_rng_matches_catalog_constant():
    from orchestrator.runner.cbrng import cb_u32
    assert int(cb_u32(1, 2, 3)) == 2136991451
    assert scalar_uniform(1, 2, 3) == ((2136991451 >> 9) + 0.5) * 2.0**-23


def test_matches_scalar_loop():
    shape = {"chains": 2, "L": 10, "n_sweeps": 3, "beta": 0.44}
    case.check_against(shape, scalar_gibbs)
    inputs, (spins, mags) = case.run(shape)
    expected_spins, expected_mags = scalar_gibbs(*inputs)
    assert torch.equal(spins, expected_spins) and torch.equal(mags, expected_mags)


def test_onsager_magnetisation_below_critical_temperature():
    beta, side, chains, sweeps = 0.6, 64, 4, 150
    p_up = (1.0 / (1.0 + torch.exp(-2.0 * beta * torch.tensor([-4.0, -2.0, 0.0, 2.0, 4.0], dtype=torch.float64)))).float()
    spins = torch.ones(chains, side, side, dtype=torch.int8)
    _, mags = case.problem.module.Model()(spins, p_up, torch.tensor(7), sweeps)
    measured = float(mags[:, 50:].mean())
    onsager = (1.0 - math.sinh(2.0 * beta) ** -4) ** 0.125
    assert abs(measured - onsager) < 0.01, (measured, onsager)


def test_disordered_phase_has_small_magnetisation():
    inputs, (_, mags) = case.run({"chains": 4, "L": 64, "n_sweeps": 60, "beta": 0.2})
    assert float(mags[:, 20:].abs().mean()) < 0.05


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = case.manifest["tolerance"]["calibration"]["shape"]
    max_abs, rel = case.drift(shape)
    assert max_abs == 0.0 and rel == 0.0
    case.check_calibration(shape)
