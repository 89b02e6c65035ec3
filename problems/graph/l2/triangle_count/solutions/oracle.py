"""Oracle for graph/l2/triangle_count: for every edge (u, v), |N(u) ∩ N(v)| by walking the
shorter adjacency list and binary-searching each neighbour in the longer one (rows are
sorted), one lane per edge; per-vertex counts are half the sum over a vertex's edges."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _common_neighbours(rowptr, col, row, out, n_edges, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = e < n_edges
    u = tl.load(row + e, mask=ok, other=0)
    v = tl.load(col + e, mask=ok, other=0)
    u0, u1 = tl.load(rowptr + u, mask=ok, other=0), tl.load(rowptr + u + 1, mask=ok, other=0)
    v0, v1 = tl.load(rowptr + v, mask=ok, other=0), tl.load(rowptr + v + 1, mask=ok, other=0)
    u_short = (u1 - u0) <= (v1 - v0)
    short0 = tl.where(u_short, u0, v0)
    short_n = tl.where(ok, tl.minimum(u1 - u0, v1 - v0), 0)
    long0 = tl.where(u_short, v0, u0)
    long1 = tl.where(u_short, v1, u1)
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for k in range(0, tl.max(short_n, axis=0)):
        live = k < short_n
        w = tl.load(col + short0 + k, mask=live, other=-1)
        lo, hi = long0, long1  # search [lo, hi) for the first entry >= w
        for _ in tl.static_range(STEPS):
            searching = live & (lo < hi)
            mid = (lo + hi) // 2
            below = tl.load(col + mid, mask=searching, other=0) < w
            lo = tl.where(searching & below, mid + 1, lo)
            hi = tl.where(searching & ~below, mid, hi)
        inside = live & (lo < long1)
        count += (inside & (tl.load(col + lo, mask=inside, other=-2) == w)).to(tl.int32)
    tl.store(out + e, count, mask=ok)


class ModelNew(nn.Module):
    def forward(self, rowptr, col):
        n, n_edges = rowptr.numel() - 1, col.numel()
        lengths = rowptr[1:] - rowptr[:-1]
        row = torch.repeat_interleave(torch.arange(n, device=col.device, dtype=col.dtype), lengths)
        common = torch.empty(n_edges, device=col.device, dtype=torch.int32)
        if n_edges:
            steps = max(int(lengths.max()).bit_length() + 1, 1)
            block = 256 if col.is_cuda else 4096  # the CPU interpreter pays per program, not per lane
            _common_neighbours[(triton.cdiv(n_edges, block),)](rowptr, col, row, common, n_edges,
                                                               BLOCK=block, STEPS=steps)
        per_node = torch.zeros(n, device=col.device, dtype=torch.long).index_add_(0, row, common.long()) // 2
        return per_node, per_node.sum() // 3
