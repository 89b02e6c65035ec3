"""Oracle for biology/l2/profile_hmm_forward: the whole Forward pass in one Triton launch.

Each program owns a [sequences x nodes] tile and walks the sequence positions. Node shifts
(k-1 -> k) go through a per-program scratch row; the delete chain D_k = LSE(a_k, D_{k-1} + t_DD)
is solved in closed form as cumsum(t_DD) + a log-space prefix sum, computed by doubling.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

NEG = float("-inf")


@triton.jit
def _lse2(a, b):
    m = tl.maximum(a, b)
    ms = tl.where(m == float("-inf"), 0.0, m)
    return ms + tl.log(tl.exp(a - ms) + tl.exp(b - ms))


@triton.jit
def _shifted(scr, vals, cols, width):
    """vals at node k-1 for every node k (-inf at k = 0): store, then load one to the left."""
    tl.debug_barrier()
    tl.store(scr + 1 + cols[None, :], vals)
    tl.debug_barrier()
    return tl.load(scr + cols[None, :])


@triton.jit
def _forward_kernel(seqs, lengths, t, e_m, e_i, scratch, out, batch, seq_len, n_nodes, log_entry,
                    BB: tl.constexpr, BK: tl.constexpr, LOG_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BB + tl.arange(0, BB)
    cols = tl.arange(0, BK)
    row_ok = rows < batch
    node_ok = cols < n_nodes
    prev_ok = (cols >= 1) & (cols <= n_nodes)
    scr = scratch + pid * BB * (BK + 1) + tl.arange(0, BB)[:, None] * (BK + 1)
    tl.store(scr, tl.full([BB, 1], float("-inf"), tl.float32))  # border column
    # transitions leaving node k-1, aligned with node k
    t_mm = tl.load(t + (cols - 1) * 7 + 0, mask=prev_ok, other=float("-inf"))[None, :]
    t_md = tl.load(t + (cols - 1) * 7 + 2, mask=prev_ok, other=float("-inf"))[None, :]
    t_im = tl.load(t + (cols - 1) * 7 + 3, mask=prev_ok, other=float("-inf"))[None, :]
    t_dm = tl.load(t + (cols - 1) * 7 + 5, mask=prev_ok, other=float("-inf"))[None, :]
    t_dd = tl.load(t + (cols - 1) * 7 + 6, mask=prev_ok, other=0.0)[None, :]
    t_mi = tl.load(t + cols * 7 + 1, mask=node_ok, other=float("-inf"))[None, :]
    t_ii = tl.load(t + cols * 7 + 4, mask=node_ok, other=float("-inf"))[None, :]
    dd_cum = tl.cumsum(t_dd, 1)
    entry = tl.where(node_ok, log_entry, float("-inf"))[None, :]
    lens = tl.load(lengths + rows, mask=row_ok, other=0)
    m = tl.full([BB, BK], float("-inf"), tl.float32)
    ins = tl.full([BB, BK], float("-inf"), tl.float32)
    d = tl.full([BB, BK], float("-inf"), tl.float32)
    score = tl.full([BB], float("-inf"), tl.float32)
    tile_ok = row_ok[:, None] & node_ok[None, :]
    for pos in range(0, seq_len):
        x = tl.load(seqs + rows.to(tl.int64) * seq_len + pos, mask=row_ok, other=0)
        em = tl.load(e_m + cols[None, :] * 20 + x[:, None], mask=tile_ok, other=float("-inf"))
        ei = tl.load(e_i + cols[None, :] * 20 + x[:, None], mask=tile_ok, other=float("-inf"))
        m_prev = _shifted(scr, m, cols, BK)
        i_prev = _shifted(scr, ins, cols, BK)
        d_prev = _shifted(scr, d, cols, BK)
        m_new = em + _lse2(_lse2(entry, m_prev + t_mm), _lse2(i_prev + t_im, d_prev + t_dm))
        ins = ei + _lse2(m + t_mi, ins + t_ii)
        m = m_new
        # D_k = dd_cum_k + LSE_{l <= k}(a_l - dd_cum_l), prefix LSE by doubling
        run = _shifted(scr, m, cols, BK) + t_md - dd_cum
        for level in tl.static_range(LOG_K):
            tl.debug_barrier()
            tl.store(scr + 1 + cols[None, :], run)
            tl.debug_barrier()
            left = tl.load(scr + 1 + cols[None, :] - (1 << level), mask=(cols >= (1 << level))[None, :],
                           other=float("-inf"))
            run = _lse2(run, left)
        d = dd_cum + run
        row_max = tl.max(m, axis=1)
        rm = tl.where(row_max == float("-inf"), 0.0, row_max)
        row_lse = rm + tl.log(tl.sum(tl.exp(m - rm[:, None]), axis=1))
        score = tl.where(pos < lens, _lse2(score, row_lse), score)
    tl.store(out + rows, score, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self, t, e_m, e_i):
        super().__init__()
        self.t, self.e_m, self.e_i = t.contiguous(), e_m.contiguous(), e_i.contiguous()

    def forward(self, seqs, lengths):
        batch, seq_len = seqs.shape
        n_nodes = self.t.shape[0]
        bk = triton.next_power_of_2(n_nodes + 1)
        bb = max(1, (1024 if seqs.is_cuda else 8192) // bk)
        n_prog = triton.cdiv(batch, bb)
        scratch = torch.empty(n_prog * bb * (bk + 1), device=seqs.device, dtype=torch.float32)
        out = torch.empty(batch, device=seqs.device, dtype=self.t.dtype)
        _forward_kernel[(n_prog,)](seqs.contiguous(), lengths, self.t, self.e_m, self.e_i, scratch, out,
                                   batch, seq_len, n_nodes, math.log(2.0 / (n_nodes * (n_nodes + 1))),
                                   BB=bb, BK=bk, LOG_K=bk.bit_length() - 1)
        return out
