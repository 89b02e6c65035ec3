"""robotics/l3/distributed_mppi: MPPI (kinematic bicycle, as robotics/l3/mppi_controller) with
the K samples split over W ranks; the softmin over samples needs three all_reduces per iteration.
"""
import torch
import torch.distributed as dist
import torch.nn as nn

DT = 0.05
WHEELBASE = 2.5
STEER_MAX, ACCEL_MAX = 0.5, 3.0


def step(state, u):
    """One Euler step of the kinematic bicycle; every update uses the old state."""
    x, y, theta, v = state.unbind(-1)
    steer, accel = u.unbind(-1)
    return torch.stack([x + v * torch.cos(theta) * DT, y + v * torch.sin(theta) * DT,
                        theta + v * torch.tan(steer) / WHEELBASE * DT, v + accel * DT], -1)


def clamp_controls(u):
    return torch.stack([u[..., 0].clamp(-STEER_MAX, STEER_MAX), u[..., 1].clamp(-ACCEL_MAX, ACCEL_MAX)], -1)


def rollout_costs(x0, goal, obs_centre, obs_radius, u, w_goal, w_coll, w_vel, v_ref):
    """Stage plus terminal cost of every sampled control sequence u [E,K,H,2] -> [E,K]."""
    e, k, h, _ = u.shape
    state = x0[:, None].expand(e, k, 4)
    cost = torch.zeros(e, k, dtype=x0.dtype, device=x0.device)
    for t in range(h):
        state = step(state, u[:, :, t])
        p = state[..., :2]
        d = (p[:, :, None] - obs_centre[:, None]).norm(dim=-1)
        hits = (d < obs_radius[:, None]).to(x0.dtype).sum(-1)
        cost = cost + w_goal * ((p - goal[:, None]) ** 2).sum(-1) + w_coll * hits + w_vel * (state[..., 3] - v_ref) ** 2
    return cost + 10 * w_goal * ((state[..., :2] - goal[:, None]) ** 2).sum(-1)


class Model(nn.Module):
    def forward(self, x0, goal, obs_centre, obs_radius, U0, eps, sigma, lam, w_goal, w_coll, w_vel, v_ref):
        U = U0
        for i in range(eps.shape[0]):
            cost = rollout_costs(x0, goal, obs_centre, obs_radius, clamp_controls(U[:, None] + eps[i]),
                                 w_goal, w_coll, w_vel, v_ref)
            S = cost + lam * (U[:, None] * eps[i] / sigma ** 2).sum((-1, -2))  # [E, K_r]
            s_min = S.amin(1)
            dist.all_reduce(s_min, op=dist.ReduceOp.MIN)
            w = torch.exp(-(S - s_min[:, None]) / lam)
            z = w.sum(1)
            dist.all_reduce(z, op=dist.ReduceOp.SUM)
            num = (w[:, :, None, None] * eps[i]).sum(1)  # [E, H, 2]
            dist.all_reduce(num, op=dist.ReduceOp.SUM)
            U = U + num / z[:, None, None]
        return U, S


def get_init_inputs(shape):
    return {}


def sample_bounds(k, world_size):
    return [r * k // world_size for r in range(world_size + 1)]


def get_inputs(shape, generator, device, rank=0, world_size=1):
    E, K, H, O, I = shape["envs"], shape["samples"], shape["horizon"], shape["obstacles"], shape["iters"]
    g = generator
    x0 = torch.stack([torch.zeros(E), torch.zeros(E), (torch.rand(E, generator=g) - 0.5) * 0.5,
                      2.0 + 2.0 * torch.rand(E, generator=g)], -1)
    goal = torch.stack([15.0 + 10.0 * torch.rand(E, generator=g), (torch.rand(E, generator=g) - 0.5) * 10.0], -1)
    obs_centre = torch.stack([2.0 + 20.0 * torch.rand(E, O, generator=g),
                              (torch.rand(E, O, generator=g) - 0.5) * 10.0], -1)
    obs_radius = 0.5 + 1.5 * torch.rand(E, O, generator=g)
    U0 = torch.zeros(E, H, 2)
    sigma = torch.tensor([0.2, 1.0])
    base = int(torch.randint(0, 2**62, (1,), generator=g))
    lo, hi = sample_bounds(K, world_size)[rank:rank + 2]
    # this rank's samples only (its own stream): no rank materialises the others' noise
    eps = torch.randn(I, E, hi - lo, H, 2, generator=torch.Generator().manual_seed(base + 999983 * rank)) * sigma
    scalars = [torch.tensor(v) for v in (1.0, 0.05, 10.0, 0.1, 5.0)]  # lambda, w_goal, w_coll, w_vel, v_ref
    return tuple(t.to(device) for t in (x0, goal, obs_centre, obs_radius, U0, eps, sigma, *scalars))
