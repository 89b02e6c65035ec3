"""biology/l2/gillespie_ssa: Gillespie direct-method SSA for many trajectories (counter-based RNG)."""
import torch
import torch.nn as nn

from orchestrator.runner.cbrng import cb_uniform64

RNG_BLOCK = 32  # events whose uniforms are drawn in one batch (the draws are identical to one-at-a-time)


def propensities(x, orders, rates):
    """a[b, m] = c_m prod_s h(x_bs, r_ms), h = 1, x, x(x-1)/2 for order 0, 1, 2 (float64)."""
    xf = x.double()[:, None, :]                                   # [B, 1, S]
    r = orders[None, :, :]
    h = torch.where(r == 0, torch.ones_like(xf), torch.where(r == 1, xf, xf * (xf - 1) / 2))
    return rates[None, :] * h.prod(-1)


class Model(nn.Module):
    def forward(self, orders, nu, rates, x0, t_end, seed):
        x = x0.clone()
        batch, n_react = x.shape[0], orders.shape[0]
        t = torch.zeros(batch, dtype=torch.float64, device=x.device)
        n_events = torch.zeros(batch, dtype=torch.int64, device=x.device)
        active = torch.ones(batch, dtype=torch.bool, device=x.device)
        traj = torch.arange(batch, device=x.device)
        draws_used = 0
        while bool(active.any()):
            a = propensities(x, orders, rates)
            cum = torch.empty_like(a)
            running = torch.zeros(batch, dtype=torch.float64, device=x.device)
            for m in range(n_react):                                  # summed in reaction order
                running = running + a[:, m]
                cum[:, m] = running
            a0 = running
            if draws_used % RNG_BLOCK == 0:                                 # draws for the next RNG_BLOCK events at once
                base = n_events
                ctr = base[:, None] + torch.arange(RNG_BLOCK, device=x.device)
                u1_block = cb_uniform64(seed, traj[:, None], ctr, 0)
                u2_block = cb_uniform64(seed, traj[:, None], ctr, 1)
            offset = (n_events - base)[:, None]                           # < RNG_BLOCK: one event per step at most
            u1 = u1_block.gather(1, offset)[:, 0]
            u2 = u2_block.gather(1, offset)[:, 0]
            draws_used += 1
            tau = -torch.log(u1) / a0
            active = active & (a0 > 0) & (t + tau <= t_end)
            above = cum > (u2 * a0)[:, None]
            # first reaction whose cumulative propensity exceeds u2 * a0 (the last one if rounding leaves none)
            choice = torch.where(above.any(1), above.int().argmax(1), torch.full_like(n_events, n_react - 1))
            step = nu[choice] * active[:, None]
            x = x + step.to(x.dtype)
            t = torch.where(active, t + tau, t)
            n_events = n_events + active.long()
        return x, n_events


def get_init_inputs(shape):
    return {}


def _network(n_species, n_react, generator):
    """Degradation of every species (keeps copy numbers bounded), then random production (order 0),
    conversion (order 1) and binding (order 2) reactions."""
    orders = torch.zeros(n_react, n_species, dtype=torch.int32)
    nu = torch.zeros(n_react, n_species, dtype=torch.int32)
    rates = torch.empty(n_react, dtype=torch.float64)
    for m in range(n_react):
        if m < n_species:                                       # X_m -> 0
            orders[m, m], nu[m, m] = 1, -1
            rates[m] = 0.05 + 0.1 * float(torch.rand(1, generator=generator))
            continue
        kind = int(torch.randint(0, 3, (1,), generator=generator))
        a, b, c = torch.randint(0, n_species, (3,), generator=generator).tolist()
        if kind == 0:                                           # 0 -> X_c
            nu[m, c] = 1
            rates[m] = 2.0 + 8.0 * float(torch.rand(1, generator=generator))
        elif kind == 1:                                         # X_a -> X_c
            orders[m, a] = 1
            nu[m, a] -= 1
            nu[m, c] += 1
            rates[m] = 0.02 + 0.1 * float(torch.rand(1, generator=generator))
        else:                                                   # X_a + X_b -> X_c
            orders[m, a] += 1
            orders[m, b] += 1
            nu[m, a] -= 1
            nu[m, b] -= 1
            nu[m, c] += 1
            rates[m] = 0.0005 + 0.002 * float(torch.rand(1, generator=generator))
    return orders, nu, rates


def get_inputs(shape, generator, device):
    n_species, n_react = shape["n_species"], shape["n_reactions"]
    orders, nu, rates = _network(n_species, n_react, generator)
    x_init = torch.randint(5, 50, (n_species,), generator=generator, dtype=torch.int32)
    x0 = x_init.expand(shape["n_traj"], -1).contiguous()
    # t_end from the initial total propensity, so trajectories see about target_events events
    a0 = float(propensities(x_init[None], orders, rates).sum())
    t_end = torch.tensor(shape["target_events"] / a0, dtype=torch.float64)
    seed = torch.randint(0, 2**31 - 1, (), generator=generator)
    return tuple(v.to(device) for v in (orders, nu, rates, x0, t_end, seed))
