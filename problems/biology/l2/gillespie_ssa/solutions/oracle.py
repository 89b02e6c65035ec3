"""Oracle for biology/l2/gillespie_ssa: all events of a block of trajectories in one launch.

The counter-based generator is reimplemented in 64-bit unsigned arithmetic (masked to 32 bits),
so the draws match orchestrator/runner/cbrng.py bit for bit. Each event sums the propensities in
reaction order twice (total, then the cumulative search), exactly the reference's float64 order;
copy numbers live in a small per-trajectory scratch row for the reactant gathers.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _hash32(x, BLOCK: tl.constexpr):
    m32 = tl.full([BLOCK], 0xFFFFFFFF, tl.uint64)
    x = x ^ (x >> 16)
    x = (x * tl.full([BLOCK], 0x7FEB352D, tl.uint64)) & m32
    x = x ^ (x >> 15)
    x = (x * tl.full([BLOCK], 0x846CA68B, tl.uint64)) & m32
    return x ^ (x >> 16)


@triton.jit
def _mix(h, c, BLOCK: tl.constexpr):
    m32 = tl.full([BLOCK], 0xFFFFFFFF, tl.uint64)
    return _hash32(((h + tl.full([BLOCK], 0x9E3779B9, tl.uint64)) & m32) ^ (c & m32), BLOCK)


@triton.jit
def _uniform64(seed_h, traj, n, k, BLOCK: tl.constexpr):
    """cb_uniform64(seed, traj, n, k): 53 bits from two 32-bit draws, forced odd."""
    h = _mix(_mix(_mix(seed_h, traj, BLOCK), n, BLOCK), k, BLOCK)
    a = _mix(h, tl.zeros([BLOCK], tl.uint64), BLOCK) >> 5
    c = _mix(h, tl.full([BLOCK], 1, tl.uint64), BLOCK) >> 6
    return ((a << 26) | c | 1).to(tl.float64) * (2.0 ** -53)


@triton.jit
def _propensity(x_row, ok, r1, r2, o1, o2, rate):
    """c * h(x_r1, o1) * h(x_r2, o2) with h = 1, x, x(x-1)/2; r = -1 means no reactant."""
    x1 = tl.load(x_row + tl.maximum(r1, 0), mask=ok, other=0).to(tl.float64)
    x2 = tl.load(x_row + tl.maximum(r2, 0), mask=ok, other=0).to(tl.float64)
    h1 = tl.where(o1 == 0, 1.0, tl.where(o1 == 1, x1, x1 * (x1 - 1.0) / 2.0))
    h2 = tl.where(o2 == 0, 1.0, tl.where(o2 == 1, x2, x2 * (x2 - 1.0) / 2.0))
    return rate * h1 * h2


@triton.jit
def _ssa(x, nu, react, rates, t_end_ptr, seed_ptr, n_out, n_traj, n_species, n_react,
         BLOCK: tl.constexpr, SP: tl.constexpr):
    traj = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = traj < n_traj
    sp = tl.arange(0, SP)
    x_row = x + traj * n_species
    t_end = tl.load(t_end_ptr)
    seed_h = _hash32(tl.zeros([BLOCK], tl.uint64) + (tl.load(seed_ptr).to(tl.uint64) & 0xFFFFFFFF), BLOCK)
    t = tl.zeros([BLOCK], dtype=tl.float64)
    n = tl.zeros([BLOCK], dtype=tl.int64)
    active = ok
    while tl.max(active.to(tl.int32), axis=0) > 0:
        a0 = tl.zeros([BLOCK], dtype=tl.float64)
        for m in range(0, n_react):                       # total, summed in reaction order
            a0 += _propensity(x_row, ok, tl.load(react + 4 * m), tl.load(react + 4 * m + 1),
                              tl.load(react + 4 * m + 2), tl.load(react + 4 * m + 3), tl.load(rates + m))
        u1 = _uniform64(seed_h, traj.to(tl.uint64), n.to(tl.uint64), tl.zeros([BLOCK], tl.uint64), BLOCK)
        u2 = _uniform64(seed_h, traj.to(tl.uint64), n.to(tl.uint64), tl.full([BLOCK], 1, tl.uint64), BLOCK)
        tau = -tl.log(u1) / a0
        active = active & (a0 > 0) & (t + tau <= t_end)
        threshold = u2 * a0
        running = tl.zeros([BLOCK], dtype=tl.float64)
        choice = tl.full([BLOCK], -1, dtype=tl.int32)
        for m in range(0, n_react):                       # first m with cum_m > u2 a0, same order
            running += _propensity(x_row, ok, tl.load(react + 4 * m), tl.load(react + 4 * m + 1),
                                   tl.load(react + 4 * m + 2), tl.load(react + 4 * m + 3), tl.load(rates + m))
            choice = tl.where((choice < 0) & (running > threshold), m, choice)
        choice = tl.where(choice < 0, n_react - 1, choice)
        tile = ok[:, None] & (sp < n_species)[None, :]
        step = tl.load(nu + choice[:, None] * n_species + sp[None, :], mask=tile & active[:, None], other=0)
        xs = tl.load(x_row[:, None] + sp[None, :], mask=tile, other=0)
        tl.debug_barrier()
        tl.store(x_row[:, None] + sp[None, :], xs + step, mask=tile)
        tl.debug_barrier()
        t = tl.where(active, t + tau, t)
        n = n + active.to(tl.int64)
    tl.store(n_out + traj, n, mask=ok)


class ModelNew(nn.Module):
    def forward(self, orders, nu, rates, x0, t_end, seed):
        n_traj, n_species = x0.shape
        n_react = orders.shape[0]
        # reactant table: (species 1, species 2, order 1, order 2), -1 / 0 when absent (total order <= 2)
        idx = torch.arange(n_species, device=orders.device).expand_as(orders)
        none = torch.full_like(orders, n_species)
        first = torch.where(orders > 0, idx, none).min(1).values
        last = torch.where(orders > 0, idx, -1).max(1).values
        safe_first = first.clamp_max(n_species - 1)
        o_first = torch.where(first < n_species, orders.gather(1, safe_first[:, None])[:, 0], 0)
        two_species = (first < n_species) & (last != first)   # A + B: orders 1 and 1
        react = torch.stack([torch.where(first < n_species, first, -1), torch.where(two_species, last, -1),
                             o_first, two_species.int()], 1).int().contiguous()
        x = x0.clone().contiguous()
        n_events = torch.empty(n_traj, dtype=torch.int64, device=x0.device)
        block = 128 if x0.is_cuda else 1024
        _ssa[(triton.cdiv(n_traj, block),)](x, nu.contiguous(), react, rates.contiguous(), t_end, seed, n_events,
                                            n_traj, n_species, n_react, BLOCK=block,
                                            SP=triton.next_power_of_2(n_species))
        return x, n_events
