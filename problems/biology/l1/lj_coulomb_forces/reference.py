"""biology/l1/lj_coulomb_forces: non-bonded Lennard-Jones + Coulomb forces from a half neighbour list.

Shifted-force cutoff: every pair term is shifted so that its energy and force vanish at r_c, so a
pair whose distance lies within rounding of r_c (a GPU sqrt or FMA moves it across) changes nothing
measurable, while a plain cutoff would move two atoms' forces by K_E q_i q_j / r_c^2.
"""
import math

import torch
import torch.nn as nn

K_E = 138.935458   # kJ mol^-1 nm e^-2
SKIN = 0.1         # nm: the pair list holds all pairs within cutoff + SKIN
SPACING = 0.3      # nm: lattice spacing of the jittered initial positions
JITTER = 0.02      # nm: max displacement per coordinate (minimum separation >= 0.3 - 2*sqrt(3)*0.02 > 0.23)
PAIR_CHUNK = 1 << 20


def _energy_and_slope(eps, sig, qq, d):
    """Plain LJ + Coulomb pair energy E(d) and dE/dd."""
    sr6 = (sig / d) ** 6
    energy = 4 * eps * (sr6 * sr6 - sr6) + qq / d
    slope = 4 * eps * (-12 * sr6 * sr6 + 6 * sr6) / d - qq / d ** 2
    return energy, slope


def _pair_terms(pos, box, charge, atype, lj, pairs, cutoff):
    """Shifted-force pair terms: E_sf(d) = E(d) - E(rc) - (d - rc) E'(rc) and force -(E'(d) - E'(rc))
    along r for d < rc. Energy and force are continuous at rc: a pair within rounding of the cutoff
    contributes ~0 on either side (a plain cutoff jumps by q_i q_j K_E / rc^2, ~30 kJ/mol/nm)."""
    i, j = pairs[:, 0].long(), pairs[:, 1].long()
    r = pos[j] - pos[i]
    r = r - box * torch.round(r / box)
    d = r.norm(dim=-1)
    within = d < cutoff
    d_safe = torch.where(within, d, torch.ones_like(d))
    sig, eps = lj[atype[i].long(), atype[j].long()].unbind(-1)
    qq = K_E * charge[i] * charge[j]
    e_d, slope_d = _energy_and_slope(eps, sig, qq, d_safe)
    e_c, slope_c = _energy_and_slope(eps, sig, qq, torch.full_like(d, cutoff))
    energy = torch.where(within, e_d - e_c - (d_safe - cutoff) * slope_c, torch.zeros_like(d))
    de_dr = torch.where(within, slope_d - slope_c, torch.zeros_like(d))
    f_j = -de_dr[:, None] * r / d_safe[:, None]   # force on j; i gets the negative
    return i, j, f_j, energy


class Model(nn.Module):
    def __init__(self, cutoff: float = 1.0):
        super().__init__()
        self.cutoff = float(cutoff)

    def forward(self, pos, box, charge, atype, lj, pairs):
        forces = torch.zeros_like(pos)
        energy = torch.zeros((), dtype=torch.float64, device=pos.device)
        for p0 in range(0, pairs.shape[0], PAIR_CHUNK):
            i, j, f_j, e = _pair_terms(pos, box, charge, atype, lj, pairs[p0:p0 + PAIR_CHUNK], self.cutoff)
            forces.index_add_(0, j, f_j)
            forces.index_add_(0, i, -f_j)
            energy = energy + e.double().sum()
        return forces, energy


def tolerance_scale(inputs, output):
    """Forces: per atom, the sum of |pair force| over its list pairs (the terms cancel over ~500
    neighbours), the same for all three components; a cutoff far beyond the list makes these the
    plain (unshifted) pair forces. The energy is compared to |E| itself (None)."""
    pos, box, charge, atype, lj, pairs = inputs
    per_atom = torch.zeros(pos.shape[0], dtype=torch.float64, device=pos.device)
    for p0 in range(0, pairs.shape[0], PAIR_CHUNK):   # float64 pair temporaries stay ~0.1 GiB
        i, j, f_j, _ = _pair_terms(pos.double(), box.double(), charge.double(), atype, lj.double(),
                                   pairs[p0:p0 + PAIR_CHUNK], 1.0e9)
        mag = f_j.norm(dim=-1)
        per_atom.index_add_(0, j, mag).index_add_(0, i, mag)
    return per_atom[:, None].expand(-1, 3), None


def get_init_inputs(shape):
    return {"cutoff": shape["cutoff"]}


def get_inputs(shape, generator, device):
    n, cutoff, n_types = shape["n_atoms"], shape["cutoff"], shape["n_types"]
    side = math.ceil(n ** (1 / 3))
    grid = torch.stack(torch.meshgrid(*[torch.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    box = torch.full((3,), side * SPACING, dtype=torch.float64)
    pos = grid.double() * SPACING + (torch.rand(n, 3, generator=generator, dtype=torch.float64) * 2 - 1) * JITTER
    charge = torch.rand(n, generator=generator, dtype=torch.float64) * 1.6 - 0.8
    charge -= charge.mean()                                      # neutral system
    atype = torch.randint(0, n_types, (n,), generator=generator)
    sigma = 0.2 + 0.12 * torch.rand(n_types, generator=generator, dtype=torch.float64)
    epsilon = 0.1 + 0.9 * torch.rand(n_types, generator=generator, dtype=torch.float64)
    lj = torch.stack([(sigma[:, None] + sigma[None, :]) / 2, torch.sqrt(epsilon[:, None] * epsilon[None, :])], -1)
    pairs = _half_pair_list(grid, pos, box, side, cutoff + SKIN)
    return (pos.float().to(device), box.float().to(device), charge.float().to(device), atype.int().to(device),
            lj.float().to(device), pairs.to(device))


def _half_pair_list(grid, pos, box, side, reach):
    """All pairs i < j within `reach` (minimum image), found through lattice offsets: a site only
    moves by JITTER, so partners lie within ceil((reach + 2 sqrt(3) JITTER) / SPACING) sites.
    2 radius + 1 <= side: distinct offsets reach distinct sites, so each unordered pair comes
    from exactly one offset of the half space (first non-zero component positive); offsets whose
    sites are too far apart even with the largest jitter are skipped."""
    n = pos.shape[0]
    radius = math.ceil((reach + 2 * math.sqrt(3) * JITTER) / SPACING)
    assert 2 * radius + 1 <= side, "box too small for the cutoff"
    rng = torch.arange(-radius, radius + 1)
    offsets = torch.stack(torch.meshgrid(rng, rng, rng, indexing="ij"), -1).reshape(-1, 3)
    first_nonzero = offsets.gather(1, (offsets != 0).long().argmax(1, keepdim=True))[:, 0]
    reachable = offsets.double().norm(dim=1) * SPACING - 2 * math.sqrt(3) * JITTER < reach
    offsets = offsets[(first_nonzero > 0) & reachable]
    index_of = torch.full((side ** 3,), -1, dtype=torch.int64)
    index_of[grid[:, 0] * side * side + grid[:, 1] * side + grid[:, 2]] = torch.arange(n)
    chunks = []
    for off in offsets:
        nb = (grid + off) % side
        j = index_of[nb[:, 0] * side * side + nb[:, 1] * side + nb[:, 2]]
        i = torch.arange(n)
        present = j >= 0                                        # the last lattice layer is partial
        i, j = i[present], j[present]
        r = pos[j] - pos[i]
        r = r - box * torch.round(r / box)
        close = r.norm(dim=-1) < reach
        i, j = i[close], j[close]
        chunks.append(torch.stack([torch.minimum(i, j), torch.maximum(i, j)], 1).int())
    pairs = torch.cat(chunks)
    del chunks
    key = pairs[:, 0].long() * n + pairs[:, 1]                  # sort by (i, j): one int64 key
    return pairs[torch.argsort(key)]
