"""probability/l1/gibbs_ising_checkerboard: heat-bath Gibbs sweeps of the periodic 2-D Ising model.

Each sweep updates the black sites ((i + j) even), then the white sites from the updated
lattice: a site becomes +1 iff cb_uniform(seed, chain, 2*sweep + colour, i*L + j) is below
p_up[(h + 4) / 2], h being the sum of its four neighbours. The thresholds are an input
(computed in float64 by get_inputs), so a candidate makes bit-identical decisions.
"""
import torch
import torch.nn as nn

from orchestrator.runner.cbrng import cb_uniform


class Model(nn.Module):
    def forward(self, spins: torch.Tensor, p_up: torch.Tensor, seed: torch.Tensor, n_sweeps: int):
        chains, side, _ = spins.shape
        s = spins.clone()
        chain = torch.arange(chains, device=s.device).view(-1, 1, 1)
        site = torch.arange(side * side, device=s.device).view(1, side, side)
        rows = torch.arange(side, device=s.device).view(-1, 1)
        cols = torch.arange(side, device=s.device).view(1, -1)
        colour_of_site = (rows + cols) % 2
        mags = []
        for sweep in range(n_sweeps):
            for colour in (0, 1):
                field = (s.roll(1, 1) + s.roll(-1, 1) + s.roll(1, 2) + s.roll(-1, 2)).long()  # in {-4..4}
                u = cb_uniform(seed, chain, 2 * sweep + colour, site)
                new = torch.where(u < p_up[(field + 4) // 2], 1, -1).to(s.dtype)
                s = torch.where(colour_of_site == colour, new, s)
            # exact: int64 spin sum, float64 divide
            mags.append((s.long().sum((1, 2)).double() / (side * side)).to(p_up.dtype))
        return s, torch.stack(mags, 1)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    chains, side, beta = shape["chains"], shape["L"], shape["beta"]
    spins = (torch.randint(0, 2, (chains, side, side), generator=generator) * 2 - 1).to(torch.int8)
    field = torch.tensor([-4.0, -2.0, 0.0, 2.0, 4.0], dtype=torch.float64)
    p_up = (1.0 / (1.0 + torch.exp(-2.0 * beta * field))).float()
    seed = torch.randint(0, 2**62, (), generator=generator, dtype=torch.int64)
    return spins.to(device), p_up.to(device), seed.to(device), int(shape["n_sweeps"])
