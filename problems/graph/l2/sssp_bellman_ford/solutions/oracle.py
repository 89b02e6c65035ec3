"""Oracle for graph/l2/sssp_bellman_ford: frontier relaxation with integer atomics. Weights
are integers and every path sum stays below 2^24, so distances are kept as int32 and
relaxed with atomic_min (one lane per frontier vertex walking its out-edges); any order of
relaxations reaches the same shortest distances, so rounds need not be synchronous: a
vertex is active next round when its distance dropped during this one."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

UNREACHED = 1 << 30  # above every path sum (< 2^24), and no overflow when a weight is added


@triton.jit
def _relax(rowptr, col, weight, dist, frontier, n_front, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n_front
    u = tl.load(frontier + i, mask=ok, other=0)
    lo = tl.load(rowptr + u, mask=ok, other=0)
    length = tl.load(rowptr + u + 1, mask=ok, other=0) - lo
    du = tl.load(dist + u, mask=ok, other=0)
    for k in range(0, tl.max(length, axis=0)):
        on = k < length
        v = tl.load(col + lo + k, mask=on, other=0)
        w = tl.load(weight + lo + k, mask=on, other=0)
        tl.atomic_min(dist + v, du + w, mask=on)


class ModelNew(nn.Module):
    def forward(self, rowptr, col, weights, source):
        n = rowptr.numel() - 1
        dist = torch.full((n,), UNREACHED, dtype=torch.int32, device=weights.device)
        dist[source] = 0
        weight = weights.to(torch.int32)  # integer-valued by the problem's contract
        block = 128 if weights.is_cuda else 8192  # the CPU interpreter pays per program, not per lane
        frontier = torch.as_tensor(source, device=weights.device).reshape(1).to(torch.long)
        while frontier.numel():
            before = dist.clone()
            _relax[(triton.cdiv(frontier.numel(), block),)](rowptr, col, weight, dist, frontier, frontier.numel(),
                                                            BLOCK=block)
            frontier = torch.nonzero(dist < before).flatten()
        out = dist.to(weights.dtype)
        return torch.where(dist >= UNREACHED, torch.full_like(out, float("inf")), out)
