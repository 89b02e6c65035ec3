"""probability/l3/flow_matching_sampler: class-conditional flow-matching sampler with classifier-free guidance.

Velocity network (AdaLN residual MLP): h = Linear(D -> W)(x); c = SiLU(temb(t) + E[y]) with
temb = sinusoidal(1000 t, 256) -> Linear(256 -> W), SiLU, Linear(W -> W) and E a class table
[n_classes + 1, W] whose last row is the null class. Each block: (shift, scale) = Linear(c),
h += W2 SiLU(W1 (LN(h) (1 + scale) + shift)) (LN without affine, W1: W -> 4W, W2: 4W -> W).
out = Linear(LN(h) (1 + scale_f) + shift_f). Guidance v = v(x,t,null) + w (v(x,t,y) - v(x,t,null)).
Time grid t_k = s u_k / (1 + (s - 1) u_k), u_k = k / N, s = 3; Heun steps, plain Euler last.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TIME_DIM = 256
SHIFT = 3.0


def time_grid(n_steps: int, dtype, device) -> torch.Tensor:
    u = torch.arange(n_steps + 1, dtype=torch.float64, device=device) / n_steps
    return (SHIFT * u / (1 + (SHIFT - 1) * u)).to(dtype)


def sinusoidal(t: torch.Tensor) -> torch.Tensor:
    half = TIME_DIM // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    angles = 1000.0 * t[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], 1)


class Model(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        for name, value in weights.items():
            self.register_buffer(name, value)
        self.n_blocks = sum(1 for name in weights if name.startswith("ada_w"))

    def velocity(self, x: torch.Tensor, t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        emb = F.linear(F.silu(F.linear(sinusoidal(t), self.temb_w1, self.temb_b1)), self.temb_w2, self.temb_b2)
        c = F.silu(emb + self.class_table[labels])
        h = F.linear(x, self.in_w, self.in_b)
        width = h.shape[1]
        for i in range(self.n_blocks):
            shift, scale = F.linear(c, getattr(self, f"ada_w{i}"), getattr(self, f"ada_b{i}")).split(width, 1)
            z = F.layer_norm(h, (width,)) * (1 + scale) + shift
            h = h + F.linear(F.silu(F.linear(z, getattr(self, f"w1_{i}"), getattr(self, f"b1_{i}"))),
                             getattr(self, f"w2_{i}"), getattr(self, f"b2_{i}"))
        shift, scale = F.linear(c, self.final_ada_w, self.final_ada_b).split(width, 1)
        return F.linear(F.layer_norm(h, (width,)) * (1 + scale) + shift, self.out_w, self.out_b)

    def guided(self, x, t: torch.Tensor, labels, null_labels, guidance: float):
        both = self.velocity(torch.cat([x, x]), t.expand(2 * x.shape[0]), torch.cat([labels, null_labels]))
        cond, uncond = both.split(x.shape[0])
        return uncond + guidance * (cond - uncond)

    def forward(self, x0: torch.Tensor, labels: torch.Tensor, n_steps: int, guidance: float):
        grid = time_grid(n_steps, x0.dtype, x0.device)
        null_labels = torch.full_like(labels, self.class_table.shape[0] - 1)
        x = x0
        for k in range(n_steps):
            dt = grid[k + 1] - grid[k]
            d1 = self.guided(x, grid[k:k + 1], labels, null_labels, guidance)
            if k == n_steps - 1:
                x = x + dt * d1  # plain Euler on the last step
            else:
                d2 = self.guided(x + dt * d1, grid[k + 1:k + 2], labels, null_labels, guidance)
                x = x + 0.5 * dt * (d1 + d2)
        return x


def _linear(fan_out: int, fan_in: int, gen: torch.Generator, gain: float = 1.0):
    bound = gain / math.sqrt(fan_in)
    return ((torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * bound,
            (torch.rand(fan_out, generator=gen) * 2 - 1) * bound)


def get_init_inputs(shape):
    dim, width, n_blocks, n_classes = shape["dim"], shape["width"], shape["n_blocks"], shape["n_classes"]
    gen = torch.Generator().manual_seed(777)
    w = {}
    w["temb_w1"], w["temb_b1"] = _linear(width, TIME_DIM, gen)
    w["temb_w2"], w["temb_b2"] = _linear(width, width, gen)
    w["class_table"] = torch.randn(n_classes + 1, width, generator=gen)
    w["in_w"], w["in_b"] = _linear(width, dim, gen)
    for i in range(n_blocks):
        w[f"ada_w{i}"], w[f"ada_b{i}"] = _linear(2 * width, width, gen, gain=0.5)
        w[f"w1_{i}"], w[f"b1_{i}"] = _linear(4 * width, width, gen)
        w[f"w2_{i}"], w[f"b2_{i}"] = _linear(width, 4 * width, gen)
    w["final_ada_w"], w["final_ada_b"] = _linear(2 * width, width, gen, gain=0.5)
    w["out_w"], w["out_b"] = _linear(dim, width, gen)
    return w


def get_inputs(shape, generator, device):
    x0 = torch.randn(shape["batch"], shape["dim"], generator=generator)
    labels = torch.randint(0, shape["n_classes"], (shape["batch"],), generator=generator)
    return x0.to(device), labels.to(device), int(shape["n_steps"]), float(shape["guidance"])
