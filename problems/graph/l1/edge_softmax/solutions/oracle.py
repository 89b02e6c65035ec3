"""Oracle for graph/l1/edge_softmax: one Triton program per destination row, an online max/sum pass over
the row's edges for all heads at once, then one normalizing pass (scores read twice, written once)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _edge_softmax_row(rowptr, scores, out, heads, BLOCK_P: tl.constexpr, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    start = tl.load(rowptr + row).to(tl.int64)
    end = tl.load(rowptr + row + 1).to(tl.int64)
    hs = tl.arange(0, BLOCK_H)
    h_ok = hs < heads
    m = tl.full([BLOCK_H], -float("inf"), tl.float32)
    z = tl.zeros([BLOCK_H], dtype=tl.float32)
    for p0 in range(start, end, BLOCK_P):
        ps = p0 + tl.arange(0, BLOCK_P)
        mask = (ps < end)[:, None] & h_ok[None, :]
        s = tl.load(scores + ps[:, None] * heads + hs[None, :], mask=mask, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        z = z * tl.exp(m - m_safe) + tl.sum(tl.exp(s - m_safe[None, :]), axis=0)
        m = m_new
    inv = 1.0 / z
    for p0 in range(start, end, BLOCK_P):
        ps = p0 + tl.arange(0, BLOCK_P)
        mask = (ps < end)[:, None] & h_ok[None, :]
        s = tl.load(scores + ps[:, None] * heads + hs[None, :], mask=mask, other=0.0)
        tl.store(out + ps[:, None] * heads + hs[None, :], tl.exp(s - m[None, :]) * inv[None, :], mask=mask)


class ModelNew(nn.Module):
    def forward(self, rowptr, scores):
        n = rowptr.numel() - 1
        heads = scores.shape[1]
        out = torch.empty_like(scores)
        if n and scores.numel():
            _edge_softmax_row[(n,)](rowptr, scores.contiguous(), out, heads,
                                    BLOCK_P=32, BLOCK_H=triton.next_power_of_2(heads))
        return out
