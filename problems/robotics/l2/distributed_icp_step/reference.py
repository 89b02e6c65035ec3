"""robotics/l2/distributed_icp_step: data-parallel point-to-plane ICP (Gauss-Newton on SE(3)).

Rank r holds a shard of fixed correspondences; each iteration every rank builds the 6x6
normal equations of its shard, three all_reduce(SUM) calls combine them, and every rank
solves and applies the same update.
"""
import torch
import torch.distributed as dist
import torch.nn as nn


def hat(w):
    """[..., 3] -> skew-symmetric [..., 3, 3]."""
    z = torch.zeros_like(w[..., 0])
    return torch.stack([torch.stack([z, -w[..., 2], w[..., 1]], -1),
                        torch.stack([w[..., 2], z, -w[..., 0]], -1),
                        torch.stack([-w[..., 1], w[..., 0], z], -1)], -2)


def so3_exp(w):
    """Rodrigues: rotation matrices [..., 3, 3] from axis-angle vectors [..., 3]."""
    theta = w.norm(dim=-1, keepdim=True)[..., None]
    k = hat(w)
    small = theta < 1e-8
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, torch.ones_like(theta), torch.sin(safe) / safe)
    b = torch.where(small, torch.full_like(theta, 0.5), (1 - torch.cos(safe)) / safe ** 2)
    eye = torch.eye(3, dtype=w.dtype, device=w.device).expand_as(k)
    return eye + a * k + b * (k @ k)


def normal_equations(src, dst, normals, weights, rot, trans):
    """Local (A [B,6,6], g [B,6], cost [B]) in float64 for residuals e = n . (R src + t - dst)."""
    p = torch.einsum("bij,bnj->bni", rot.to(src.dtype), src) + trans.to(src.dtype)[:, None, :]
    e = ((p - dst) * normals).sum(-1)  # [B, n]
    jac = torch.cat([torch.cross(p, normals, dim=-1), normals], -1).double()  # d e / d (omega, v)
    w = weights.double()
    e64 = e.double()
    a = torch.einsum("bn,bni,bnj->bij", w, jac, jac)
    g = torch.einsum("bn,bni,bn->bi", w, jac, e64)
    cost = (w * e64 * e64).sum(-1)
    return a, g, cost


class Model(nn.Module):
    def __init__(self, iters):
        super().__init__()
        self.iters = int(iters)

    def forward(self, src, dst, normals, weights):
        b = src.shape[0]
        rot = torch.eye(3, dtype=torch.float64, device=src.device).repeat(b, 1, 1)
        trans = torch.zeros(b, 3, dtype=torch.float64, device=src.device)
        costs = []
        for _ in range(self.iters):
            a, g, cost = normal_equations(src, dst, normals, weights, rot, trans)
            for t in (a, g, cost):  # three separate collectives per iteration
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
            x = -torch.linalg.solve(a, g)
            step = so3_exp(x[:, :3])
            rot = step @ rot
            trans = (step @ trans[..., None])[..., 0] + x[:, 3:]
            costs.append(cost)
        pose = torch.zeros(b, 4, 4, dtype=torch.float64, device=src.device)
        pose[:, :3, :3], pose[:, :3, 3], pose[:, 3, 3] = rot, trans, 1.0
        return pose.to(src.dtype), torch.stack(costs).to(src.dtype)


def get_init_inputs(shape):
    return {"iters": shape["iters"]}


def true_motion(shape, generator):
    """The rigid motion [B,3,3], [B,3] every rank's correspondences come from (about 0.1 rad, 0.1 units)."""
    b = shape["batch"]
    axis = torch.randn(b, 3, generator=generator, dtype=torch.float64)
    angle = 0.05 + 0.1 * torch.rand(b, 1, generator=generator, dtype=torch.float64)
    rot = so3_exp(axis / axis.norm(dim=-1, keepdim=True) * angle)
    trans = 0.1 * torch.randn(b, 3, generator=generator, dtype=torch.float64)
    return rot, trans


def get_inputs(shape, generator, device, rank=0, world_size=1):
    b, n = shape["batch"], shape["points_per_rank"]
    rot, trans = true_motion(shape, generator)
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    g = torch.Generator().manual_seed(base + 7919 * rank)  # this rank's shard only: no rank builds the others
    src = torch.rand(b, n, 3, generator=g) * 2 - 1
    normals = torch.randn(b, n, 3, generator=g)
    normals = normals / normals.norm(dim=-1, keepdim=True)
    noise = 1e-3 * torch.randn(b, n, 1, generator=g)
    dst = (torch.einsum("bij,bnj->bni", rot, src.double()) + trans[:, None, :]).float() + noise * normals
    weights = 0.5 + 0.5 * torch.rand(b, n, generator=g)
    return tuple(t.to(device) for t in (src, dst, normals, weights))
