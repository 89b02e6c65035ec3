"""probability/l3/distributed_particle_filter: probability/l3/particle_filter_bootstrap (Kitagawa's
growth model, float64 internally) with each sequence's N particles split over W ranks.

Rank r holds global particles [r*N//W, (r+1)*N//W). Normalisation and ESS are global (all_reduce
MAX and SUM); systematic resampling uses a global CDF (local cumsum + offsets from an all_gather
of per-rank totals), and the resampled particle for global slot i moves to the rank owning slot i
(counts, then values, with all_to_all_single).
"""
import math

import torch
import torch.distributed as dist
import torch.nn as nn

SIGMA_V = math.sqrt(10.0)
SIGMA_W = 1.0
ESS_FRACTION = 0.5


def block(n, world_size, rank):
    return rank * n // world_size, (rank + 1) * n // world_size


def transition(x, t):
    return 0.5 * x + 25 * x / (1 + x * x) + 8 * math.cos(1.2 * t)


def resample(x, weights, u, n, resampling):
    """Systematic resampling over all ranks for the sequences flagged in `resampling` [B]."""
    world, rank = dist.get_world_size(), dist.get_rank()
    lo, hi = block(n, world, rank)
    totals = [torch.empty_like(weights[:, 0]) for _ in range(world)]
    local_cdf = torch.cumsum(weights, 1)
    dist.all_gather(totals, local_cdf[:, -1].contiguous())
    totals = torch.stack(totals, 1)  # [B, W]
    grand = totals.sum(1, keepdim=True)
    starts = (torch.cumsum(totals, 1) - totals) / grand  # normalised CDF before each rank
    ends = torch.cat([starts[:, 1:], torch.full_like(starts[:, :1], math.inf)], 1)  # last rank takes the rest
    cdf = (starts[:, rank:rank + 1] * grand + local_cdf) / grand
    slots = torch.arange(n, dtype=torch.float64, device=x.device)
    positions = (u[:, None] + slots) / n  # [B, N], increasing
    mine = (positions >= starts[:, rank:rank + 1]) & (positions < ends[:, rank:rank + 1]) & resampling[:, None]
    first = torch.searchsorted(positions, starts[:, rank:rank + 1].contiguous()).squeeze(1)  # my first slot per sequence
    count = mine.sum(1)
    send_counts, send_values = [], []
    for q in range(world):  # slots of rank q that my CDF range covers, per sequence
        q_lo, q_hi = block(n, world, q)
        a = torch.clamp(first, q_lo, q_hi)
        b = torch.clamp(first + count, q_lo, q_hi)
        send_counts.append(b - a)
        for s, (a_s, b_s) in enumerate(zip(a.tolist(), b.tolist())):  # one host sync per peer, not two per sequence
            idx = torch.arange(a_s, b_s, device=x.device)
            anc = torch.searchsorted(cdf[s], positions[s, idx], right=True).clamp_(max=hi - lo - 1)
            send_values.append(x[s, anc])
    send_counts = torch.stack(send_counts)  # [W, B]
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    values = torch.cat(send_values)
    recv = torch.empty(int(recv_counts.sum()), dtype=x.dtype, device=x.device)
    dist.all_to_all_single(recv, values, recv_counts.sum(1).tolist(), send_counts.sum(1).tolist())
    # from each source rank (in rank order): sequence 0's slots, sequence 1's, ...
    pieces = recv.split(recv_counts.flatten().tolist())
    new_x = x.clone()
    for s, flagged in enumerate(resampling.tolist()):
        if flagged:
            new_x[s] = torch.cat([pieces[p * x.shape[0] + s] for p in range(world)])
    return new_x


class Model(nn.Module):
    def forward(self, y, x0, v, u):
        batch, steps = y.shape
        n = self._n_total(x0)
        out_dtype = x0.dtype
        work = torch.promote_types(x0.dtype, torch.float64)
        y, x, v, u = y.to(work), x0.to(work), v.to(work), u.to(work)
        logw = torch.full_like(x, -math.log(n))
        log_z = torch.zeros(batch, dtype=torch.float64, device=x.device)
        log_norm = math.log(SIGMA_W * math.sqrt(2 * math.pi))
        means = []
        for t in range(steps):
            x = transition(x, t + 1) + SIGMA_V * v[t]
            logw = logw - 0.5 * ((y[:, t:t + 1] - x * x / 20) / SIGMA_W) ** 2 - log_norm
            m = logw.amax(1)
            dist.all_reduce(m, op=dist.ReduceOp.MAX)
            s = torch.exp(logw - m[:, None]).sum(1)
            dist.all_reduce(s)
            lse = m + torch.log(s)
            log_z += lse
            logw = logw - lse[:, None]
            weights = logw.exp()
            mean = (weights * x).sum(1)
            dist.all_reduce(mean)
            means.append(mean)
            sq = (weights ** 2).sum(1)
            dist.all_reduce(sq)
            resampling = 1.0 / sq < ESS_FRACTION * n
            if bool(resampling.any()):
                x = resample(x, weights, u[t], n, resampling)
                logw = torch.where(resampling[:, None], torch.full_like(logw, -math.log(n)), logw)
        return torch.stack(means, 1).to(out_dtype), log_z.to(out_dtype)

    @staticmethod
    def _n_total(x0):
        n = torch.tensor([x0.shape[1]], device=x0.device)
        dist.all_reduce(n)
        return int(n)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device, rank=0, world_size=1):
    batch, n, steps = shape["batch"], shape["n_particles"], shape["T"]
    state = torch.randn(batch, generator=generator, dtype=torch.float64) * math.sqrt(5.0)
    observations = []
    for t in range(steps):  # simulate the observed sequences from the model itself
        state = transition(state, t + 1) + SIGMA_V * torch.randn(batch, generator=generator, dtype=torch.float64)
        observations.append(state * state / 20 + SIGMA_W * torch.randn(batch, generator=generator, dtype=torch.float64))
    y = torch.stack(observations, 1).float()
    u = torch.rand(steps, batch, generator=generator)
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    lo, hi = block(n, world_size, rank)
    g = torch.Generator().manual_seed(base + 131071 * rank)  # this rank's particles and their noise
    x0 = torch.randn(batch, hi - lo, generator=g) * math.sqrt(5.0)
    v = torch.randn(steps, batch, hi - lo, generator=g)
    return tuple(t.to(device) for t in (y, x0, v, u))
