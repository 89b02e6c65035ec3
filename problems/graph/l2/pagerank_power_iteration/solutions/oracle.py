"""Oracle for graph/l2/pagerank_power_iteration.

One Triton kernel per iteration over blocks of destination rows: each lane pulls contrib[src] over its
row's in-edges (no nnz-sized temporary), applies the damping update, and
in its epilogue already writes the next iteration's contrib = r / out_degree plus per-block partial sums
of the dangling mass and of |r_new - r_old|. Only those partials (N / 128 values) are summed with torch.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _pagerank_step(rowptr, col, contrib_in, r_in, inv_out, lost_in, damping, r_out, contrib_out,
                   lost_partial, resid_partial, n, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < n
    lo = tl.load(rowptr + rows, mask=row_ok, other=0)
    hi = tl.load(rowptr + rows + 1, mask=row_ok, other=0)
    # one lane per destination row walks its in-edges (the block runs as long as its longest
    # row): the earlier [rows x nnz] masked sum did BLOCK_R times the work and ran 0.41x the
    # reference on the H200
    length = hi - lo
    longest = tl.max(length, axis=0)
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for k in range(0, longest):
        on = k < length
        src = tl.load(col + lo + k, mask=on, other=0)
        acc += tl.load(contrib_in + src, mask=on, other=0.0)
    d = tl.load(damping)
    lost = tl.load(lost_in)
    r = (1.0 - d) / n + d * (acc + lost / n)
    inv = tl.load(inv_out + rows, mask=row_ok, other=0.0)
    old = tl.load(r_in + rows, mask=row_ok, other=0.0)
    tl.store(r_out + rows, r, mask=row_ok)
    tl.store(contrib_out + rows, r * inv, mask=row_ok)
    tl.store(lost_partial + pid, tl.sum(tl.where(row_ok & (inv == 0.0), r, 0.0), axis=0))
    tl.store(resid_partial + pid, tl.sum(tl.where(row_ok, tl.abs(r - old), 0.0), axis=0))


class ModelNew(nn.Module):
    def __init__(self, iters):
        super().__init__()
        self.iters = int(iters)

    def forward(self, rowptr, col, out_degree, damping):
        n = rowptr.numel() - 1
        dev = rowptr.device
        block_r = 128
        blocks = triton.cdiv(n, block_r)
        dangling = out_degree == 0
        inv_out = torch.where(dangling, 0.0, 1.0 / out_degree.clamp_min(1).float())
        r = torch.full((n,), 1.0 / n, device=dev, dtype=torch.float32)
        contrib = r * inv_out
        lost = (dangling.sum() / n).float().reshape(1)
        r_next, contrib_next = torch.empty_like(r), torch.empty_like(r)
        lost_partial = torch.empty(blocks, device=dev, dtype=torch.float32)
        resid_partial = torch.zeros(blocks, device=dev, dtype=torch.float32)
        for _ in range(self.iters):
            _pagerank_step[(blocks,)](rowptr, col, contrib, r, inv_out, lost, damping, r_next, contrib_next,
                                      lost_partial, resid_partial, n, BLOCK_R=block_r)
            r, r_next = r_next, r
            contrib, contrib_next = contrib_next, contrib
            lost = lost_partial.sum().reshape(1)
        return r, resid_partial.sum()
