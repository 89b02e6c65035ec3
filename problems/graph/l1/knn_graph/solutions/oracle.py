"""Oracle for graph/l1/knn_graph: streaming exact k-NN, never materialising N x N.

Each program owns BM query rows of one cloud and a running top-k list per row in registers
([BM, KP] distances and indices, unsorted). It streams the cloud in BN-column tiles: exact
squared differences, then only the tile entries below the row's current k-th distance are
inserted, smallest first, each replacing the current worst; after the first tiles hardly any
entry qualifies, so most tiles cost one distance tile and one comparison. Order is the
lexicographic (d2, index) of the reference's stable sort. At the end each entry's rank in its
row ([BM, KP, KP] comparisons) is its output column: no sort at all.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

NO_INDEX = tl.constexpr(2 ** 31 - 1)


@triton.jit
def _less(da, ja, db, jb):
    return (da < db) | ((da == db) & (ja < jb))


@triton.jit
def _worst(ld, lj, KP: tl.constexpr):
    """Per row: the lexicographically largest (d2, index) of the list and its slot."""
    wd = tl.max(ld, axis=1)
    wj = tl.max(tl.where(ld == wd[:, None], lj, -1), axis=1)
    slot = tl.min(tl.where((ld == wd[:, None]) & (lj == wj[:, None]), tl.arange(0, KP)[None, :], KP), axis=1)
    return wd, wj, slot


@triton.jit
def _knn(pos, idx_out, d2_out, n, dim, k, BM: tl.constexpr, BN: tl.constexpr, KP: tl.constexpr):
    b = tl.program_id(1).to(tl.int64)
    cloud = pos + b * n * dim
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    row_ok = rows < n
    slots = tl.arange(0, KP)[None, :]
    # slots >= k hold (-inf, -1): never the worst, never replaced, dropped at the end
    ld = tl.where(slots < k, float("inf"), float("-inf")) + tl.zeros([BM, KP], dtype=tl.float32)
    lj = tl.where(slots < k, NO_INDEX - 1, -1) + tl.zeros([BM, KP], dtype=tl.int32)
    for start in range(0, n, BN):
        cols = start + tl.arange(0, BN)
        d = tl.zeros([BM, BN], dtype=tl.float32)
        for c in range(dim):
            pi = tl.load(cloud + rows * dim + c, mask=row_ok, other=0.0)
            pj = tl.load(cloud + cols * dim + c, mask=cols < n, other=0.0)
            diff = pi[:, None] - pj[None, :]
            d += diff * diff
        usable = (cols[None, :] < n) & (cols[None, :] != rows[:, None])
        d = tl.where(usable, d, float("inf"))
        j = tl.where(usable, cols[None, :], NO_INDEX)
        wd, wj, slot = _worst(ld, lj, KP)
        better = _less(d, j, wd[:, None], wj[:, None])
        while tl.max(tl.max(better.to(tl.int32), axis=1), axis=0) > 0:
            # the row's smallest qualifying entry replaces its current worst
            cd = tl.where(better, d, float("inf"))
            bd = tl.min(cd, axis=1)
            bj = tl.min(tl.where(better & (cd == bd[:, None]), j, NO_INDEX), axis=1)
            has = tl.max(better.to(tl.int32), axis=1) > 0
            put = has[:, None] & (slots == slot[:, None])
            ld = tl.where(put, bd[:, None], ld)
            lj = tl.where(put, bj[:, None], lj)
            wd, wj, slot = _worst(ld, lj, KP)
            better = better & (j != bj[:, None]) & _less(d, j, wd[:, None], wj[:, None])
    # rank of every kept entry among the kept entries of its row = its output column
    real = slots < k
    before = _less(ld[:, None, :], lj[:, None, :], ld[:, :, None], lj[:, :, None]) & real[:, None, :]
    rank = tl.sum(before.to(tl.int32), axis=2)  # [BM, KP]
    out = (b * n + rows[:, None]) * k + rank
    keep = row_ok[:, None] & real
    tl.store(idx_out + out, lj.to(tl.int64), mask=keep)
    tl.store(d2_out + out, ld, mask=keep)


class ModelNew(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = int(k)

    def forward(self, pos):
        batch, n, dim = pos.shape
        pos = pos.contiguous()
        idx = torch.empty(batch, n, self.k, dtype=torch.long, device=pos.device)
        d2 = torch.empty(batch, n, self.k, dtype=pos.dtype, device=pos.device)
        kp = triton.next_power_of_2(self.k)
        if pos.is_cuda:
            bm, bn, warps = (32 if kp <= 32 else 16), 128, 8
        else:  # the interpreter prefers few, wide programs
            bm, bn, warps = 256, min(1024, triton.next_power_of_2(n)), 4
        _knn[(triton.cdiv(n, bm), batch)](pos, idx, d2, n, dim, self.k, BM=bm, BN=bn, KP=kp, num_warps=warps)
        return idx, d2
