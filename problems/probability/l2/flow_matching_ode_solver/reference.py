"""probability/l2/flow_matching_ode_solver: integrate dx/dt = v_theta(x, t) from t = 0 to 1 with RK4.

v_theta is a flow-matching velocity MLP: a 64-dim sinusoidal embedding of 1000 t
(frequencies 10000^(-k/32)) concatenated with x, then Linear(D+64 -> H), SiLU,
Linear(H -> H), SiLU, Linear(H -> D). Its weights stand in for a trained network.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TIME_DIM = 64


def time_embedding(t: float, dtype: torch.dtype, device) -> torch.Tensor:
    half = TIME_DIM // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=dtype, device=device) / half)
    angles = 1000.0 * torch.as_tensor(t, dtype=dtype, device=device) * freqs
    return torch.cat([torch.sin(angles), torch.cos(angles)])


class Model(nn.Module):
    def __init__(self, w1, b1, w2, b2, w3, b3):
        super().__init__()
        self.w1, self.b1 = nn.Parameter(w1), nn.Parameter(b1)
        self.w2, self.b2 = nn.Parameter(w2), nn.Parameter(b2)
        self.w3, self.b3 = nn.Parameter(w3), nn.Parameter(b3)

    def velocity(self, x: torch.Tensor, t: float) -> torch.Tensor:
        emb = time_embedding(t, x.dtype, x.device).expand(x.shape[0], -1)
        h = F.silu(F.linear(torch.cat([x, emb], -1), self.w1, self.b1))
        h = F.silu(F.linear(h, self.w2, self.b2))
        return F.linear(h, self.w3, self.b3)

    def forward(self, x0: torch.Tensor, n_steps: int) -> torch.Tensor:
        x, h = x0, 1.0 / n_steps
        for k in range(n_steps):  # classic RK4 on the uniform grid t_k = k / n_steps
            t = k * h
            k1 = self.velocity(x, t)
            k2 = self.velocity(x + 0.5 * h * k1, t + 0.5 * h)
            k3 = self.velocity(x + 0.5 * h * k2, t + 0.5 * h)
            k4 = self.velocity(x + h * k3, t + h)
            x = x + (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
        return x


def _linear_init(fan_out: int, fan_in: int, gen: torch.Generator, gain: float = 1.0):
    bound = gain / math.sqrt(fan_in)  # nn.Linear's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))
    w = (torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * bound
    b = (torch.rand(fan_out, generator=gen) * 2 - 1) * bound
    return w, b


def get_init_inputs(shape):
    dim, hidden = shape["dim"], shape["hidden"]
    gen = torch.Generator().manual_seed(20240611)
    w1, b1 = _linear_init(hidden, dim + TIME_DIM, gen)
    w2, b2 = _linear_init(hidden, hidden, gen)
    w3, b3 = _linear_init(dim, hidden, gen, gain=8.0)  # a velocity of order one moves the samples visibly
    return {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "w3": w3, "b3": b3}


def get_inputs(shape, generator, device):
    x0 = torch.randn(shape["batch"], shape["dim"], generator=generator)
    return x0.to(device), int(shape["n_steps"])
