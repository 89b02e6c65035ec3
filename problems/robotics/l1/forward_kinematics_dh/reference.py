"""robotics/l1/forward_kinematics_dh: every link frame of a serial arm from a standard DH table."""
import math

import torch
import torch.nn as nn


def dh_transforms(q: torch.Tensor, dh: torch.Tensor) -> torch.Tensor:
    """A_i [B,J,4,4] in the closed form Rot_z(q + theta) Trans_z(d) Trans_x(a) Rot_x(alpha)."""
    a, alpha, d, offset = dh.unbind(-1)                     # [J] each
    t = q + offset                                          # [B,J]
    ct, st = torch.cos(t), torch.sin(t)
    ca, sa = torch.cos(alpha).expand_as(t), torch.sin(alpha).expand_as(t)
    zero, one = torch.zeros_like(t), torch.ones_like(t)
    rows = [
        [ct, -st * ca, st * sa, a * ct],
        [st, ct * ca, -ct * sa, a * st],
        [zero, sa, ca, d.expand_as(t)],
        [zero, zero, zero, one],
    ]
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


class Model(nn.Module):
    def forward(self, q, dh):                               # q [B,J], dh [J,4] = (a, alpha, d, theta_offset)
        A = dh_transforms(q, dh)
        frames = []
        T = torch.eye(4, dtype=q.dtype, device=q.device).expand(q.shape[0], 4, 4)
        for i in range(q.shape[1]):                         # T_i = T_{i-1} A_i
            T = torch.matmul(T, A[:, i])
            frames.append(T)
        return torch.stack(frames, 1)                       # [B,J,4,4]


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    b, j = shape["batch"], shape["n_joints"]
    q = (torch.rand(b, j, generator=generator) * 2 - 1) * math.pi
    a = torch.rand(j, generator=generator) * 0.4            # link lengths up to 0.4 m
    alpha = (torch.rand(j, generator=generator) * 2 - 1) * math.pi
    d = torch.rand(j, generator=generator) * 0.3
    offset = (torch.rand(j, generator=generator) * 2 - 1) * math.pi
    dh = torch.stack([a, alpha, d, offset], -1)
    return q.to(device), dh.to(device)
