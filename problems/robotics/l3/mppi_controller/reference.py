"""robotics/l3/mppi_controller: Model Predictive Path Integral control of a kinematic bicycle.

E environments, K sampled control sequences of horizon H, I iterations. The noise is an
input (already scaled by sigma), so forward() is deterministic.

The obstacle cost is a continuous penetration depth, not a count of obstacles hit: with
lambda = 1 the softmin weights sit on a few samples, and an indicator that flips when a
position lies within rounding of a boundary moved S_k by w_coll = 10, i.e. a weight by e^10,
so GPU and CPU disagreed on U by 4 % (later iterations amplify the flips).
"""
import torch
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


def penetration(p, obs_centre, obs_radius):
    """sum over obstacles of max(0, 1 - |p - c|^2 / r^2) for positions p [E,K,2]: 1 at a centre,
    0 on and outside the boundary, continuous (an indicator jumps by w_coll at the boundary)."""
    dist2 = ((p[:, :, None] - obs_centre[:, None]) ** 2).sum(-1)                   # [E,K,O]
    return (1 - dist2 / obs_radius[:, None] ** 2).clamp(min=0).sum(-1)


def clamp_controls(u):
    return torch.stack([u[..., 0].clamp(-STEER_MAX, STEER_MAX), u[..., 1].clamp(-ACCEL_MAX, ACCEL_MAX)], -1)


class Model(nn.Module):
    def forward(self, x0, goal, obs_centre, obs_radius, U0, eps, sigma, lam, w_goal, w_coll, w_vel, v_ref):
        I, E, K, H, _ = eps.shape
        U = U0
        for i in range(I):
            u = clamp_controls(U[:, None] + eps[i])                                  # [E,K,H,2]
            state = x0[:, None].expand(E, K, 4)
            cost = torch.zeros(E, K, dtype=x0.dtype, device=x0.device)
            for t in range(H):
                state = step(state, u[:, :, t])
                p = state[..., :2]
                cost = cost + w_goal * ((p - goal[:, None]) ** 2).sum(-1) + w_coll * penetration(p, obs_centre, obs_radius) \
                    + w_vel * (state[..., 3] - v_ref) ** 2
            cost = cost + 10 * w_goal * ((state[..., :2] - goal[:, None]) ** 2).sum(-1)   # terminal
            S = cost + lam * (U[:, None] * eps[i] / sigma ** 2).sum((-1, -2))
            weights = torch.softmax(-(S - S.amin(1, keepdim=True)) / lam, dim=1)      # [E,K]
            U = U + (weights[:, :, None, None] * eps[i]).sum(1)
        u = clamp_controls(U)
        state, rollout = x0, []
        for t in range(H):
            state = step(state, u[:, t])
            rollout.append(state)
        return U, S, torch.stack(rollout, 1)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    E, K, H, O, I = shape["envs"], shape["samples"], shape["horizon"], shape["obstacles"], shape["iters"]
    g = generator
    x0 = torch.stack([torch.zeros(E), torch.zeros(E), (torch.rand(E, generator=g) - 0.5) * 0.5,
                      2.0 + 2.0 * torch.rand(E, generator=g)], -1)
    goal = torch.stack([15.0 + 10.0 * torch.rand(E, generator=g), (torch.rand(E, generator=g) - 0.5) * 10.0], -1)
    # obstacles scattered between start and goal
    obs_centre = torch.stack([2.0 + 20.0 * torch.rand(E, O, generator=g),
                              (torch.rand(E, O, generator=g) - 0.5) * 10.0], -1)
    obs_radius = 0.5 + 1.5 * torch.rand(E, O, generator=g)
    U0 = torch.stack([0.1 * torch.randn(E, H, generator=g), 0.5 + 0.5 * torch.randn(E, H, generator=g)], -1)  # warm start
    sigma = torch.tensor([0.2, 1.0])
    eps = torch.randn(I, E, K, H, 2, generator=g) * sigma
    # lambda = 10: with costs in the thousands, lambda = 1 put the softmin on one or two samples, and a
    # 1e-6 relative change of U0 moved U by up to 2.4e-4 and the rollout by 1.8e-3 m; at 10, 3.3e-5 and 9e-5 m
    scalars = [torch.tensor(v) for v in (10.0, 0.05, 10.0, 0.1, 5.0)]   # lambda, w_goal, w_coll, w_vel, v_ref
    return tuple(t.to(device) for t in (x0, goal, obs_centre, obs_radius, U0, eps, sigma, *scalars))
