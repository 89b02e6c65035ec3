"""Oracle for robotics/l1/point_to_plane_icp_normal_equations: fused accumulation + in-kernel solve.

Kernel 1: each program reads a chunk of points once and reduces the 28 distinct sums
(21 of the symmetric A, 6 of g, the cost) in float64, writing one partial row. Kernel 2:
one lane per batch element sums the partials, then solves (A + 1e-9 I) x = -g by a 6x6
Cholesky and two triangular solves, all in float64.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partials(src, dst, nrm, wts, part, N, n_chunks, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    c = tl.program_id(1)
    idx = c * BLOCK + tl.arange(0, BLOCK)
    m = idx < N
    base = (b * N + idx) * 3
    p0 = tl.load(src + base, mask=m, other=0.0).to(tl.float64)
    p1 = tl.load(src + base + 1, mask=m, other=0.0).to(tl.float64)
    p2 = tl.load(src + base + 2, mask=m, other=0.0).to(tl.float64)
    n0 = tl.load(nrm + base, mask=m, other=0.0).to(tl.float64)
    n1 = tl.load(nrm + base + 1, mask=m, other=0.0).to(tl.float64)
    n2 = tl.load(nrm + base + 2, mask=m, other=0.0).to(tl.float64)
    r = (n0 * (p0 - tl.load(dst + base, mask=m, other=0.0).to(tl.float64))
         + n1 * (p1 - tl.load(dst + base + 1, mask=m, other=0.0).to(tl.float64))
         + n2 * (p2 - tl.load(dst + base + 2, mask=m, other=0.0).to(tl.float64)))
    w = tl.load(wts + b * N + idx, mask=m, other=0.0).to(tl.float64)
    j0, j1, j2 = p1 * n2 - p2 * n1, p2 * n0 - p0 * n2, p0 * n1 - p1 * n0
    out = part + (b * n_chunks + c) * 28
    wr = w * r
    tl.store(out + 0, tl.sum(w * j0 * j0, axis=0))
    tl.store(out + 1, tl.sum(w * j0 * j1, axis=0))
    tl.store(out + 2, tl.sum(w * j0 * j2, axis=0))
    tl.store(out + 3, tl.sum(w * j0 * n0, axis=0))
    tl.store(out + 4, tl.sum(w * j0 * n1, axis=0))
    tl.store(out + 5, tl.sum(w * j0 * n2, axis=0))
    tl.store(out + 6, tl.sum(w * j1 * j1, axis=0))
    tl.store(out + 7, tl.sum(w * j1 * j2, axis=0))
    tl.store(out + 8, tl.sum(w * j1 * n0, axis=0))
    tl.store(out + 9, tl.sum(w * j1 * n1, axis=0))
    tl.store(out + 10, tl.sum(w * j1 * n2, axis=0))
    tl.store(out + 11, tl.sum(w * j2 * j2, axis=0))
    tl.store(out + 12, tl.sum(w * j2 * n0, axis=0))
    tl.store(out + 13, tl.sum(w * j2 * n1, axis=0))
    tl.store(out + 14, tl.sum(w * j2 * n2, axis=0))
    tl.store(out + 15, tl.sum(w * n0 * n0, axis=0))
    tl.store(out + 16, tl.sum(w * n0 * n1, axis=0))
    tl.store(out + 17, tl.sum(w * n0 * n2, axis=0))
    tl.store(out + 18, tl.sum(w * n1 * n1, axis=0))
    tl.store(out + 19, tl.sum(w * n1 * n2, axis=0))
    tl.store(out + 20, tl.sum(w * n2 * n2, axis=0))
    tl.store(out + 21, tl.sum(wr * j0, axis=0))
    tl.store(out + 22, tl.sum(wr * j1, axis=0))
    tl.store(out + 23, tl.sum(wr * j2, axis=0))
    tl.store(out + 24, tl.sum(wr * n0, axis=0))
    tl.store(out + 25, tl.sum(wr * n1, axis=0))
    tl.store(out + 26, tl.sum(wr * n2, axis=0))
    tl.store(out + 27, tl.sum(wr * r, axis=0))


@triton.jit
def _reduce_solve(part, A_out, g_out, cost_out, x_out, work, B, n_chunks, BLOCK_B: tl.constexpr):
    b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    bm = b < B
    # sum the partial rows into work [B, 28] (float64)
    for k in range(28):
        acc = tl.zeros([BLOCK_B], tl.float64)
        for c in range(n_chunks):
            acc += tl.load(part + (b * n_chunks + c) * 28 + k, mask=bm, other=0.0)
        tl.store(work + b * 64 + k, acc, mask=bm)
    # unpack the upper triangle into the full symmetric A (work[b, 28:64] as a 6x6, row-major)
    t = 0
    for i in tl.static_range(6):
        for j in tl.static_range(i, 6):
            a = tl.load(work + b * 64 + t, mask=bm, other=0.0)
            tl.store(work + b * 64 + 28 + i * 6 + j, a, mask=bm)
            tl.store(work + b * 64 + 28 + j * 6 + i, a, mask=bm)
            tl.store(A_out + b * 36 + i * 6 + j, a.to(tl.float32), mask=bm)
            tl.store(A_out + b * 36 + j * 6 + i, a.to(tl.float32), mask=bm)
            t += 1
    for k in tl.static_range(6):
        tl.store(g_out + b * 6 + k, tl.load(work + b * 64 + 21 + k, mask=bm, other=0.0).to(tl.float32), mask=bm)
    tl.store(cost_out + b, tl.load(work + b * 64 + 27, mask=bm, other=0.0).to(tl.float32), mask=bm)
    # in-place Cholesky of A + 1e-9 I (lower triangle of the 6x6 block)
    M = work + b * 64 + 28
    for k in tl.static_range(6):
        d = tl.load(M + k * 7, mask=bm, other=1.0) + 1e-9
        for p in tl.static_range(k):
            v = tl.load(M + k * 6 + p, mask=bm, other=0.0)
            d -= v * v
        lkk = tl.sqrt(d)
        tl.store(M + k * 7, lkk, mask=bm)
        for i in tl.static_range(k + 1, 6):
            acc = tl.load(M + i * 6 + k, mask=bm, other=0.0)
            for p in tl.static_range(k):
                acc -= tl.load(M + i * 6 + p, mask=bm, other=0.0) * tl.load(M + k * 6 + p, mask=bm, other=0.0)
            tl.store(M + i * 6 + k, acc / lkk, mask=bm)
    # L y = -g (y over g's slots 21..26), then L^T x = y
    for i in tl.static_range(6):
        acc = -tl.load(work + b * 64 + 21 + i, mask=bm, other=0.0)
        for p in tl.static_range(i):
            acc -= tl.load(M + i * 6 + p, mask=bm, other=0.0) * tl.load(work + b * 64 + 21 + p, mask=bm, other=0.0)
        tl.store(work + b * 64 + 21 + i, acc / tl.load(M + i * 7, mask=bm, other=1.0), mask=bm)
    for ii in tl.static_range(6):
        i = 5 - ii
        acc = tl.load(work + b * 64 + 21 + i, mask=bm, other=0.0)
        for p in tl.static_range(6 - ii, 6):  # i + 1; a local assigned from a constexpr is not one
            acc -= tl.load(M + p * 6 + i, mask=bm, other=0.0) * tl.load(work + b * 64 + 21 + p, mask=bm, other=0.0)
        xi = acc / tl.load(M + i * 7, mask=bm, other=1.0)
        tl.store(work + b * 64 + 21 + i, xi, mask=bm)
        tl.store(x_out + b * 6 + i, xi.to(tl.float32), mask=bm)


class ModelNew(nn.Module):
    def forward(self, src, dst, normals, weights):
        B, N, _ = src.shape
        dev = src.device
        BLOCK = 2048 if src.is_cuda else 4096
        n_chunks = triton.cdiv(N, BLOCK)
        part = torch.empty(B * n_chunks * 28, device=dev, dtype=torch.float64)
        work = torch.empty(B * 64, device=dev, dtype=torch.float64)
        A = torch.empty(B, 6, 6, device=dev, dtype=torch.float32)
        g = torch.empty(B, 6, device=dev, dtype=torch.float32)
        cost = torch.empty(B, device=dev, dtype=torch.float32)
        x = torch.empty(B, 6, device=dev, dtype=torch.float32)
        _partials[(B, n_chunks)](src.contiguous(), dst.contiguous(), normals.contiguous(), weights.contiguous(),
                                 part, N, n_chunks, BLOCK=BLOCK)
        _reduce_solve[(triton.cdiv(B, 64),)](part, A, g, cost, x, work, B, n_chunks, BLOCK_B=64)
        return A, g, cost, x
