"""One all_gather per step of each rank's (max, rescaled normaliser, rescaled weighted sum,
rescaled sum of squares) merged by the log-sum-exp rule, instead of four dependent all_reduces;
resampling as the reference (global CDF, particles moved to the owners of their slots)."""
import math

import torch
import torch.distributed as dist
import torch.nn as nn

SIGMA_V = math.sqrt(10.0)
SIGMA_W = 1.0
ESS_FRACTION = 0.5


def transition(x, t):
    return 0.5 * x + 25 * x / (1 + x * x) + 8 * math.cos(1.2 * t)


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


class ModelNew(nn.Module):
    def forward(self, y, x0, v, u):
        world = dist.get_world_size()
        batch, steps = y.shape
        n_t = torch.tensor([x0.shape[1]], device=x0.device)
        dist.all_reduce(n_t)
        n = int(n_t)
        y, x, v, u = y.double(), x0.double(), v.double(), u.double()
        logw = torch.full_like(x, -math.log(n))
        log_z = torch.zeros(batch, dtype=torch.float64, device=x.device)
        log_norm = math.log(SIGMA_W * math.sqrt(2 * math.pi))
        means = []
        for t in range(steps):
            x = transition(x, t + 1) + SIGMA_V * v[t]
            logw = logw - 0.5 * (y[:, t:t + 1] - x * x / 20) ** 2 - log_norm
            m = logw.amax(1, keepdim=True)
            e = torch.exp(logw - m)
            packed = torch.stack([m[:, 0], e.sum(1), (e * x).sum(1), (e * e).sum(1)], 1)
            parts = [torch.empty_like(packed) for _ in range(world)]
            dist.all_gather(parts, packed)
            parts = torch.stack(parts)  # [W, B, 4]
            big_m = parts[:, :, 0].amax(0)
            scale = torch.exp(parts[:, :, 0] - big_m)
            s = (scale * parts[:, :, 1]).sum(0)
            lse = big_m + torch.log(s)
            log_z += lse
            means.append((scale * parts[:, :, 2]).sum(0) / s)
            ess = s * s / (scale * scale * parts[:, :, 3]).sum(0)
            logw = logw - lse[:, None]
            resampling = ess < ESS_FRACTION * n
            if bool(resampling.any()):
                x = resample(x, logw.exp(), u[t], n, resampling)
                logw = torch.where(resampling[:, None], torch.full_like(logw, -math.log(n)), logw)
        return torch.stack(means, 1).float(), log_z.float()
