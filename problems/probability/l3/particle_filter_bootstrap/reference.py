"""probability/l3/particle_filter_bootstrap: bootstrap SIR filter with adaptive systematic resampling.

Kitagawa's nonstationary growth model, B independent observation sequences, N particles each:
x_t = 0.5 x + 25 x / (1 + x^2) + 8 cos(1.2 t) + sigma_v v_t,  y_t = x_t^2 / 20 + sigma_w w_t.
Per step: propagate, add the observation log-likelihood, normalise by logsumexp (log Z-hat
accumulated in float64), record the filtered mean, and when ESS = 1 / sum W^2 < N / 2
resample systematically (float64 CDF, searchsorted right) and reset the weights.

The filter runs in float64 internally (the inputs are float32): with float32 particles a
rounding difference flips about N * 1e-7 resampling ancestors per step and two correct
implementations drift apart by O(1) in the filtered means; in float64 they agree to ~1e-10.
"""
import math

import torch
import torch.nn as nn

SIGMA_V = math.sqrt(10.0)
SIGMA_W = 1.0
ESS_FRACTION = 0.5


def transition(x: torch.Tensor, t: int) -> torch.Tensor:
    return 0.5 * x + 25 * x / (1 + x * x) + 8 * math.cos(1.2 * t)


def observe(x: torch.Tensor) -> torch.Tensor:
    return x * x / 20


class Model(nn.Module):
    def transition(self, x: torch.Tensor, t: int) -> torch.Tensor:
        return transition(x, t)

    def observe(self, x: torch.Tensor) -> torch.Tensor:
        return observe(x)

    def forward(self, y: torch.Tensor, x0: torch.Tensor, v: torch.Tensor, u: torch.Tensor):
        batch, steps = y.shape
        n = x0.shape[1]
        out_dtype = x0.dtype
        work = torch.promote_types(x0.dtype, torch.float64)
        y, x, v, u = y.to(work), x0.to(work), v.to(work), u.to(work)
        logw = torch.full((batch, n), -math.log(n), dtype=work, device=x.device)
        log_z = torch.zeros(batch, dtype=torch.float64, device=x.device)
        slots = torch.arange(n, dtype=torch.float64, device=x.device)
        log_norm = math.log(SIGMA_W * math.sqrt(2 * math.pi))
        means = []
        for t in range(steps):
            x = self.transition(x, t + 1) + SIGMA_V * v[t]  # proposal = prior
            logw = logw - 0.5 * ((y[:, t:t + 1] - self.observe(x)) / SIGMA_W) ** 2 - log_norm
            lse = torch.logsumexp(logw, 1, keepdim=True)
            log_z += lse[:, 0]
            logw = logw - lse
            weights = logw.exp()
            means.append((weights * x).sum(1))
            ess = 1.0 / (weights ** 2).sum(1)
            cdf = torch.cumsum(weights, 1)
            cdf = cdf / cdf[:, -1:]
            positions = (u[t][:, None] + slots) / n
            ancestors = torch.searchsorted(cdf, positions, right=True).clamp_(max=n - 1)
            resample = (ess < ESS_FRACTION * n)[:, None]
            x = torch.where(resample, torch.gather(x, 1, ancestors), x)
            logw = torch.where(resample, torch.full_like(logw, -math.log(n)), logw)
        return torch.stack(means, 1).to(out_dtype), log_z.to(out_dtype)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    batch, n, steps = shape["batch"], shape["n_particles"], shape["T"]
    state = torch.randn(batch, generator=generator, dtype=torch.float64) * math.sqrt(5.0)
    observations = []
    for t in range(steps):  # simulate the observed sequences from the model itself
        state = transition(state, t + 1) + SIGMA_V * torch.randn(batch, generator=generator, dtype=torch.float64)
        observations.append(observe(state) + SIGMA_W * torch.randn(batch, generator=generator, dtype=torch.float64))
    y = torch.stack(observations, 1).float()
    x0 = torch.randn(batch, n, generator=generator) * math.sqrt(5.0)
    v = torch.randn(steps, batch, n, generator=generator)
    u = torch.rand(steps, batch, generator=generator)
    return tuple(t.to(device) for t in (y, x0, v, u))
