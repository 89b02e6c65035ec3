"""Oracle for graph/l1/bfs_level_expand: one fused pull pass over the in-edge CSC.

Every unvisited vertex scans its in-neighbours (ascending, as stored) and keeps the smallest
one in the frontier: that is the min-parent rule with no atomics, no frontier compaction and
no edge list, and next = parent >= 0 is written in the same pass. In-degrees are near
Poisson here (targets are uniform), so BR vertices x BK in-edges tiles are well balanced.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

NONE = tl.constexpr(2 ** 31 - 1)


@triton.jit
def _pull(colptr, row, frontier, visited, next_out, parent_out, n, BR: tl.constexpr, BK: tl.constexpr):
    v = tl.program_id(0) * BR + tl.arange(0, BR)
    ok = v < n
    seen = tl.load(visited + v, mask=ok, other=1).to(tl.int32)
    active = ok & (seen == 0)
    start = tl.load(colptr + v, mask=active, other=0)
    end = tl.where(active, tl.load(colptr + v + 1, mask=active, other=0), start)
    best = tl.full([BR], NONE, tl.int32)
    for k0 in range(0, tl.max(end - start, axis=0), BK):
        e = start[:, None] + k0 + tl.arange(0, BK)[None, :]
        m = e < end[:, None]
        u = tl.load(row + e, mask=m, other=0)
        hit = m & (tl.load(frontier + u, mask=m, other=0).to(tl.int32) != 0)
        best = tl.minimum(best, tl.min(tl.where(hit, u, NONE), axis=1))
    found = best < NONE
    tl.store(parent_out + v, tl.where(found, best, -1), mask=ok)
    tl.store(next_out + v, found, mask=ok)


class ModelNew(nn.Module):
    def forward(self, rowptr, col, colptr, row, frontier, visited):
        n = rowptr.numel() - 1
        parent = torch.empty(n, dtype=torch.int32, device=col.device)
        nxt = torch.empty(n, dtype=torch.bool, device=col.device)
        block = 128 if col.is_cuda else 4096  # the interpreter prefers few, wide programs
        if n:
            _pull[(triton.cdiv(n, block),)](colptr, row, frontier, visited, nxt, parent, n, BR=block, BK=32)
        return nxt, parent
