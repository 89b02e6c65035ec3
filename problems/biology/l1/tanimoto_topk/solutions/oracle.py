"""Oracle for biology/l1/tanimoto_topk: Triton popcount similarities and a Triton top-k selection.

1. Each program computes a [queries x database] tile of Tanimoto similarities: AND, 32-bit SWAR
   popcount and the fp32 division, all in registers.
2. Each query row selects its k best by k sweeps, each taking the best entry strictly after the
   previous pick in the order (sim descending, index ascending): no sort.
Queries go in blocks so that the similarity matrix stays at most 4 GiB.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

SIMS_ELEMENTS = 1 << 30


@triton.jit
def _popcount32(x):
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return (x * 0x01010101) >> 24


@triton.jit
def _similarity(q, d, sims, n_q, n_db, words, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    r_ok = rows < n_q
    c_ok = cols < n_db
    common = tl.zeros([BM, BN], dtype=tl.int32)
    pa = tl.zeros([BM], dtype=tl.int32)
    pb = tl.zeros([BN], dtype=tl.int32)
    for w in range(0, words):
        qa = tl.load(q + rows.to(tl.int64) * words + w, mask=r_ok, other=0).to(tl.uint32)
        db = tl.load(d + cols.to(tl.int64) * words + w, mask=c_ok, other=0).to(tl.uint32)
        common += _popcount32(qa[:, None] & db[None, :]).to(tl.int32)
        pa += _popcount32(qa).to(tl.int32)
        pb += _popcount32(db).to(tl.int32)
    denom = pa[:, None] + pb[None, :] - common
    # div_rn: correctly rounded like torch's division; Triton's `/` on a GPU may be off by an ulp,
    # which reorders near-ties of the top-k
    sim = tl.where(denom > 0, tl.math.div_rn(common.to(tl.float32), tl.maximum(denom, 1).to(tl.float32)), 0.0)
    tl.store(sims + rows[:, None].to(tl.int64) * n_db + cols[None, :], sim, mask=r_ok[:, None] & c_ok[None, :])


@triton.jit
def _select_topk(vals, idx_out, val_out, n, k, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = vals + row.to(tl.int64) * n
    prev_v = float("inf")
    prev_i = -1
    for r in range(0, k):
        best_v = float("-inf")
        best_i = n  # n means "none yet"
        for c0 in range(0, n, BLOCK):
            c = c0 + tl.arange(0, BLOCK)
            v = tl.load(base + c, mask=c < n, other=float("-inf"))
            after = (c < n) & ((v < prev_v) | ((v == prev_v) & (c > prev_i)))
            v = tl.where(after, v, float("-inf"))
            block_v = tl.max(v, axis=0)
            block_i = tl.min(tl.where(after & (v == block_v), c, n), axis=0)
            take = (block_v > best_v) | ((block_v == best_v) & (block_i < best_i))
            best_i = tl.where(take, block_i, best_i)
            best_v = tl.where(take, block_v, best_v)
        tl.store(idx_out + row * k + r, best_i.to(tl.int64))
        tl.store(val_out + row * k + r, best_v)
        prev_v = best_v
        prev_i = best_i


class ModelNew(nn.Module):
    def __init__(self, k: int = 10):
        super().__init__()
        self.k = int(k)

    def forward(self, queries, database):
        n_q, words = queries.shape
        n_db = database.shape[0]
        queries, database = queries.contiguous(), database.contiguous()
        # queries in blocks whose similarity matrix holds at most SIMS_ELEMENTS (4 GiB)
        block = max(1, min(n_q, SIMS_ELEMENTS // n_db))
        sims = torch.empty(block, n_db, device=queries.device, dtype=torch.float32)
        idx = torch.empty(n_q, self.k, device=queries.device, dtype=torch.int64)
        val = torch.empty(n_q, self.k, device=queries.device, dtype=torch.float32)
        bm, bn = (32, 64) if queries.is_cuda else (64, 4096)
        for q0 in range(0, n_q, block):
            rows = min(block, n_q - q0)
            _similarity[(triton.cdiv(rows, bm), triton.cdiv(n_db, bn))](queries[q0:], database, sims,
                                                                       rows, n_db, words, BM=bm, BN=bn)
            _select_topk[(rows,)](sims, idx[q0:], val[q0:], n_db, self.k, BLOCK=1024 if queries.is_cuda else 8192)
        return idx, val
