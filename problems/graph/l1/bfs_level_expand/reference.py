"""graph/l1/bfs_level_expand: one BFS level, next frontier and the smallest-id parent of each new vertex."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, rowptr, col, colptr, row, frontier, visited):
        """Out-edge CSR (rowptr, col) and the same graph as in-edge CSC (colptr, row): a candidate may
        push from the frontier or pull into unvisited vertices; both give the same unique answer."""
        n = rowptr.numel() - 1
        src = frontier.nonzero().squeeze(1)
        count = (rowptr[src + 1] - rowptr[src]).long()
        first = torch.repeat_interleave(rowptr[src].long(), count)
        offset = torch.arange(int(count.sum()), device=col.device) - torch.repeat_interleave(
            torch.cumsum(count, 0) - count, count)
        dst = col[first + offset].long()
        parent_of_edge = torch.repeat_interleave(src, count)
        keep = ~visited[dst]
        parent = torch.full((n,), -1, dtype=torch.long, device=col.device)
        parent = parent.scatter_reduce(0, dst[keep], parent_of_edge[keep], "amin", include_self=False)
        return parent >= 0, parent.int()


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, avg_degree = shape["n"], shape["avg_degree"]
    # power-law out-degrees (Pareto exponent 2.1), uniform targets, no self-loops or repeats
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / 1.1)
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, n).long()
    src = torch.repeat_interleave(torch.arange(n), deg)
    dst = torch.randint(0, n, (src.numel(),), generator=generator)
    # The judge makes every set on the CPU, where sorting 10^8 keys is most of the cost: mask the
    # keys once, and order the CSC by a stable sort of the int32 targets (the edges come ordered
    # by source, so that is (target, source) order without sorting 64-bit keys again).
    key = torch.unique((src * n + dst)[src != dst])
    src, dst = key // n, (key % n).int()
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=n), 0)
    by_dst = torch.argsort(dst, stable=True)
    colptr = torch.zeros(n + 1, dtype=torch.long)
    colptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    # visited: a random visited_frac of the vertices; the frontier is a random subset of them
    score = torch.rand(n, generator=generator)
    visited = score < shape["visited_frac"]
    frontier = score < shape["visited_frac"] * min(1.0, shape["frontier_frac"] / max(shape["visited_frac"], 1e-9))
    frontier &= visited
    return tuple(t.to(device) for t in (rowptr.int(), dst, colptr.int(), src[by_dst].int(), frontier, visited))
