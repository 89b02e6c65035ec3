"""graph/l1/uniform_random_walks: W uniform random walks of L steps drawn with the counter-based RNG."""
import torch
import torch.nn as nn

from orchestrator.runner.cbrng import cb_u32


class Model(nn.Module):
    def __init__(self, walk_length):
        super().__init__()
        self.walk_length = int(walk_length)

    def forward(self, rowptr, col, starts, seed):
        """Step t of walk w picks neighbour j = (cb_u32(seed, w, t) * deg) >> 32 (Lemire); sinks stay put."""
        walk_ids = torch.arange(starts.numel(), device=starts.device)
        cur = starts
        steps = [cur]
        for t in range(self.walk_length):
            deg = rowptr[cur + 1] - rowptr[cur]
            j = (cb_u32(seed, walk_ids, t) * deg) >> 32
            nxt = col[(rowptr[cur] + j).clamp_max(max(col.numel() - 1, 0))] if col.numel() else cur
            cur = torch.where(deg > 0, nxt, cur)
            steps.append(cur)
        return torch.stack(steps, dim=1)


def get_init_inputs(shape):
    return {"walk_length": shape["walk_length"]}


def get_inputs(shape, generator, device):
    n, avg_degree, n_walks = shape["n"], shape["avg_degree"], shape["n_walks"]
    # power-law out-degrees (Pareto exponent 2.1, some sinks), uniform targets, sorted, unique
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / 1.1)
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, n).long()
    deg[torch.rand(n, generator=generator) < 0.05] = 0  # 5% sinks
    src = torch.repeat_interleave(torch.arange(n), deg)
    dst = torch.randint(0, n, (src.numel(),), generator=generator)
    key = torch.unique(src * n + dst)
    src, dst = key // n, key % n
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=n), 0)
    starts = torch.randint(0, n, (n_walks,), generator=generator)
    seed = torch.randint(0, 2 ** 62, (), generator=generator)
    return tuple(t.to(device) for t in (rowptr, dst, starts, seed))
