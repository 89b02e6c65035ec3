"""probability/l3/score_sde_pc_sampler: predictor-corrector sampler of a variance-exploding SDE.

Levels sigma_i = sigma_max (sigma_min / sigma_max)^(i / (N - 1)), i = 0..N-1, sigma_N = 0.
Score model s(x, sigma) = MLP([x, GFF(log sigma)]) / sigma - x / (1 + sigma^2): an MLP with three
SiLU hidden layers of width H on x and 64 Gaussian Fourier features [sin(2 pi w log sigma),
cos(2 pi w log sigma)] (w: 32 fixed frequencies), divided by sigma as in Song et al. (2021), plus
the score of N(0, (1 + sigma^2) I) (the network is a residual around a unit-Gaussian data model).
Level i: predictor (reverse diffusion) x += (sigma_i^2 - sigma_{i+1}^2) s(x, sigma_i)
+ sqrt(sigma_i^2 - sigma_{i+1}^2) z; then, if sigma_{i+1} > 0, one Langevin corrector with
g = s(x, sigma_{i+1}), eps = 2 (r mean_b ||z'_b|| / mean_b ||g_b||)^2, r = 0.16,
x += eps g + sqrt(2 eps) z'. Noise: z[b, d] = normal(seed, 2 i, b, d), z'[b, d] = normal(seed, 2 i + 1, b, d),
normal(...) = Box-Muller sqrt(-2 log u0) cos(2 pi u1) with u_j = cb_uniform(seed, ..., j).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from orchestrator.runner.cbrng import M32, cb_u32, hash32

SNR = 0.16
N_FREQ = 32


def levels(sigma_min: float, sigma_max: float, n_levels: int) -> list[float]:
    """sigma_0 > ... > sigma_{N-1} geometric, then sigma_N = 0 (computed in double precision)."""
    ratio = sigma_min / sigma_max
    return [sigma_max * ratio ** (i / (n_levels - 1)) for i in range(n_levels)] + [0.0]


def box_muller_normal(seed: torch.Tensor, counter: int, batch: int, dim: int, dtype, device) -> torch.Tensor:
    """[batch, dim] normals from cb_uniform(seed, counter, b, d, 0) and (..., 1): the hash prefix
    over (seed, counter, b, d) is shared by the two uniforms."""
    rows = torch.arange(batch, device=device).view(-1, 1)
    cols = torch.arange(dim, device=device).view(1, -1)
    prefix = (cb_u32(seed, counter, rows, cols) + 0x9E3779B9) & M32
    u0, u1 = (((hash32(prefix ^ j) >> 9).to(dtype) + 0.5) * 2.0**-23 for j in (0, 1))
    return torch.sqrt(-2.0 * torch.log(u0)) * torch.cos(2 * math.pi * u1)


class Model(nn.Module):
    def __init__(self, **weights: torch.Tensor):
        super().__init__()
        for name, value in weights.items():
            self.register_buffer(name, value)

    def score(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        angles = 2 * math.pi * math.log(sigma) * self.gff_w
        feats = torch.cat([torch.sin(angles), torch.cos(angles)]).expand(x.shape[0], 2 * N_FREQ)
        h = F.silu(F.linear(torch.cat([x, feats], 1), self.w1, self.b1))
        h = F.silu(F.linear(h, self.w2, self.b2))
        h = F.silu(F.linear(h, self.w3, self.b3))
        return F.linear(h, self.w_out, self.b_out) / sigma - x / (1.0 + sigma * sigma)

    def forward(self, x_init: torch.Tensor, seed: torch.Tensor, sigma_min: float, sigma_max: float, n_levels: int):
        batch, dim = x_init.shape
        sig = levels(sigma_min, sigma_max, n_levels)
        x = x_init
        for i in range(n_levels):
            var_step = sig[i] ** 2 - sig[i + 1] ** 2
            z = box_muller_normal(seed, 2 * i, batch, dim, x.dtype, x.device)
            x = x + var_step * self.score(x, sig[i]) + math.sqrt(var_step) * z
            if sig[i + 1] > 0:
                g = self.score(x, sig[i + 1])
                z = box_muller_normal(seed, 2 * i + 1, batch, dim, x.dtype, x.device)
                ratio = SNR * z.norm(dim=1).mean() / g.norm(dim=1).mean()
                eps = 2 * ratio * ratio
                x = x + eps * g + torch.sqrt(2 * eps) * z
        return x


def _linear(fan_out: int, fan_in: int, gen: torch.Generator, gain: float = 1.0):
    bound = gain / math.sqrt(fan_in)
    return ((torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * bound,
            (torch.rand(fan_out, generator=gen) * 2 - 1) * bound)


def get_init_inputs(shape):
    """Random weights with a small output layer: the residual MLP stays a modest correction to the
    Gaussian score (so the sampler is stable for every level count) but moves x by O(0.1-1)."""
    dim, hidden = shape["dim"], shape["hidden"]
    gen = torch.Generator().manual_seed(2021)
    w = {"gff_w": torch.randn(N_FREQ, generator=gen) * 16.0}
    w["w1"], w["b1"] = _linear(hidden, dim + 2 * N_FREQ, gen, gain=math.sqrt(3.0))
    w["w2"], w["b2"] = _linear(hidden, hidden, gen, gain=math.sqrt(3.0))
    w["w3"], w["b3"] = _linear(hidden, hidden, gen, gain=math.sqrt(3.0))
    w["w_out"], w["b_out"] = _linear(dim, hidden, gen, gain=0.3)
    return w


def get_inputs(shape, generator, device):
    sigma_min, sigma_max = 0.01, 10.0
    x_init = sigma_max * torch.randn(shape["batch"], shape["dim"], generator=generator)
    seed = torch.randint(0, 2**62, (), generator=generator, dtype=torch.int64)
    return x_init.to(device), seed.to(device), sigma_min, sigma_max, int(shape["n_levels"])
