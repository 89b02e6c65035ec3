"""biology/l3/md_langevin_simulation: Langevin dynamics (BAOAB) of a Lennard-Jones fluid, reduced units."""
import math

import torch
import torch.nn as nn

R_CUT = 2.5
DT, GAMMA, KT = 0.005, 1.0, 1.0
ROW_CHUNK = 1024  # rows of the N x N pair matrix per chunk


def lj_forces(x, box):
    """Forces and potential energy of LJ truncated at R_CUT and shifted to zero there (minimum image)."""
    n = x.shape[0]
    rc2 = R_CUT * R_CUT
    shift = 4 * (R_CUT ** -12 - R_CUT ** -6)
    forces = torch.empty_like(x)
    energy = x.new_zeros(())
    for r0 in range(0, n, ROW_CHUNK):
        d = x[r0:r0 + ROW_CHUNK, None, :] - x[None, :, :]        # [C, N, 3]
        d = d - box * torch.round(d / box)                      # minimum image
        r2 = (d * d).sum(-1)
        inside = (r2 < rc2) & (r2 > 0)                          # r2 = 0 only for i == j
        inv2 = torch.where(inside, 1 / torch.where(inside, r2, torch.ones_like(r2)), torch.zeros_like(r2))
        inv6 = inv2 * inv2 * inv2
        fmag = (48 * inv6 * inv6 - 24 * inv6) * inv2
        forces[r0:r0 + ROW_CHUNK] = (fmag[..., None] * d).sum(1)
        energy = energy + torch.where(inside, 4 * (inv6 * inv6 - inv6) - shift, torch.zeros_like(r2)).sum() / 2
    return forces, energy


class Model(nn.Module):
    def forward(self, x0, v0, box, noise):
        c1 = math.exp(-GAMMA * DT)
        c2 = math.sqrt(1 - c1 * c1) * math.sqrt(KT)
        x, v = x0.clone(), v0.clone()
        f, _ = lj_forces(x, box)
        energies = []
        for step in range(noise.shape[0]):
            v = v + 0.5 * DT * f             # B
            x = x + 0.5 * DT * v             # A
            v = c1 * v + c2 * noise[step]    # O
            x = x + 0.5 * DT * v             # A
            f, e = lj_forces(x, box)
            v = v + 0.5 * DT * f             # B
            energies.append(e)
        return x, v, torch.stack(energies)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, steps, rho = shape["n_particles"], shape["n_steps"], shape["density"]
    box = (n / rho) ** (1 / 3)
    cells = math.ceil((n / 4) ** (1 / 3))                         # smallest fcc lattice with >= n sites
    basis = torch.tensor([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]], dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(*[torch.arange(cells, dtype=torch.float64)] * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    sites = ((grid + basis) / cells).reshape(-1, 3)
    keep = torch.randperm(sites.shape[0], generator=generator)[:n].sort().values
    spacing = box / cells
    x0 = sites[keep] * box + 0.03 * spacing * torch.randn(n, 3, generator=generator, dtype=torch.float64)
    v0 = torch.randn(n, 3, generator=generator, dtype=torch.float64) * math.sqrt(KT)
    v0 -= v0.mean(0)                                              # no net momentum
    noise = torch.randn(steps, n, 3, generator=generator)
    return x0.float().to(device), v0.float().to(device), torch.tensor(box, dtype=torch.float32).to(device), noise.to(device)
