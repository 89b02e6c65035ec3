"""probability/l2/distributed_sgld_step: data-parallel stochastic gradient Langevin dynamics
(Welling & Teh 2011) for a Bayesian 2-layer tanh MLP classifier.

Step s on rank r: the minibatch NLL gradient of rows idx[s] of the rank's shard (autograd),
one all_reduce(SUM) per parameter tensor (DDP without bucketing), then on every rank
theta <- theta + eps/2 (-alpha theta + n/(W b) * (-g)) + sqrt(eps) xi[s].
"""
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def param_shapes(d_in, hidden, classes):
    return [(d_in, hidden), (hidden,), (hidden, classes), (classes,)]


def unflatten(theta, shapes):
    out, k = [], 0
    for s in shapes:
        n = math.prod(s)
        out.append(theta[k:k + n].view(s))
        k += n
    return out


class Model(nn.Module):
    def __init__(self, d_in, hidden, classes, eps, alpha):
        super().__init__()
        self.shapes = param_shapes(d_in, hidden, classes)
        self.eps, self.alpha = float(eps), float(alpha)

    def forward(self, theta0, x, y, idx, xi):
        world = dist.get_world_size()
        n_total, b = x.shape[0] * world, idx.shape[1]
        theta, traj = theta0.clone(), []
        for s in range(idx.shape[0]):
            with torch.enable_grad():
                params = [p.detach().requires_grad_() for p in unflatten(theta, self.shapes)]
                w1, b1, w2, b2 = params
                xb, yb = x[idx[s]], y[idx[s]]
                nll = F.cross_entropy(torch.tanh(xb @ w1 + b1) @ w2 + b2, yb, reduction="sum")
                grads = torch.autograd.grad(nll, params)
            for g in grads:  # one collective per parameter tensor
                dist.all_reduce(g, op=dist.ReduceOp.SUM)
            g = torch.cat([t.reshape(-1) for t in grads])
            theta = theta + self.eps / 2 * (-self.alpha * theta - n_total / (world * b) * g) + math.sqrt(self.eps) * xi[s]
            traj.append(theta)
        return torch.stack(traj)


def get_init_inputs(shape):
    return {"d_in": shape["d_in"], "hidden": shape["hidden"], "classes": shape["classes"], "eps": 1e-5, "alpha": 1.0}


def n_params(shape):
    return sum(math.prod(s) for s in param_shapes(shape["d_in"], shape["hidden"], shape["classes"]))


def get_inputs(shape, generator, device, rank=0, world_size=1):
    d, h, c, b, steps = shape["d_in"], shape["hidden"], shape["classes"], shape["batch_per_rank"], shape["steps"]
    n_local = 4 * b  # every rank holds 4 minibatches of data
    scales = [1 / math.sqrt(d), 0.0, 1 / math.sqrt(h), 0.0]
    theta0 = torch.cat([torch.randn(math.prod(s), generator=generator) * sc
                        for s, sc in zip(param_shapes(d, h, c), scales)])
    teacher = torch.randn(d, c, generator=generator)
    xi = torch.randn(steps, theta0.numel(), generator=generator)  # identical on every rank
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    g = torch.Generator().manual_seed(base + 104729 * rank)  # this rank's data shard and minibatches
    x = torch.randn(n_local, d, generator=g)
    y = (x @ teacher + 0.5 * torch.randn(n_local, c, generator=g)).argmax(1)
    idx = torch.stack([torch.randperm(n_local, generator=g)[:b] for _ in range(steps)])
    return tuple(t.to(device) for t in (theta0, x, y, idx, xi))
