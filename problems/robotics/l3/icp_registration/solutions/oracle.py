"""Oracle for robotics/l3/icp_registration: a fused neighbour-search + normal-equation kernel.

Per iteration, one program per (batch, block of source points) transforms its points by the
current pose, scans dst in tiles keeping a running (distance, first index) minimum in registers,
gathers the neighbour and its normal, and reduces the inliers' 6x6 normal equations in float64
(correspondences are never written out). A second kernel sums the partials of each batch element
and solves (A + 1e-9 I) x = -g by an in-register Cholesky. The SE(3) composition of B poses is
torch glue.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

N_PART = 48          # 36 entries of A, 6 of g, the inlier sum of squares, the count (and padding)


@triton.jit
def _nn_normal_equations(src, dst, nrm, pose, d_max2, part, N, M, n_blocks,
                         BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    b = tl.program_id(0)
    blk = tl.program_id(1)
    i = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    im = i < N
    T = pose + b * 12
    sx = tl.load(src + (b * N + i) * 3, mask=im, other=0.0)
    sy = tl.load(src + (b * N + i) * 3 + 1, mask=im, other=0.0)
    sz = tl.load(src + (b * N + i) * 3 + 2, mask=im, other=0.0)
    px = tl.load(T + 0) * sx + tl.load(T + 1) * sy + tl.load(T + 2) * sz + tl.load(T + 3)
    py = tl.load(T + 4) * sx + tl.load(T + 5) * sy + tl.load(T + 6) * sz + tl.load(T + 7)
    pz = tl.load(T + 8) * sx + tl.load(T + 9) * sy + tl.load(T + 10) * sz + tl.load(T + 11)
    best = tl.full([BLOCK_N], float("inf"), tl.float32)
    best_idx = tl.zeros([BLOCK_N], tl.int32)
    for m0 in range(0, M, BLOCK_M):
        m = m0 + tl.arange(0, BLOCK_M)
        mm = m < M
        qx = tl.load(dst + (b * M + m) * 3, mask=mm, other=0.0)
        qy = tl.load(dst + (b * M + m) * 3 + 1, mask=mm, other=0.0)
        qz = tl.load(dst + (b * M + m) * 3 + 2, mask=mm, other=0.0)
        dx = px[:, None] - qx[None, :]
        dy = py[:, None] - qy[None, :]
        dz = pz[:, None] - qz[None, :]
        d2 = dx * dx + dy * dy + dz * dz
        d2 = tl.where(mm[None, :], d2, float("inf"))
        tile_min = tl.min(d2, axis=1)
        tile_arg = tl.argmin(d2, axis=1) + m0                     # first minimum within the tile
        better = tile_min < best                                  # strict: earlier tiles win ties
        best_idx = tl.where(better, tile_arg, best_idx)
        best = tl.where(better, tile_min, best)
    inlier = im & (best < d_max2)
    q = dst + (b * M + best_idx) * 3
    n = nrm + (b * M + best_idx) * 3
    qx = tl.load(q, mask=im, other=0.0).to(tl.float64)
    qy = tl.load(q + 1, mask=im, other=0.0).to(tl.float64)
    qz = tl.load(q + 2, mask=im, other=0.0).to(tl.float64)
    nx = tl.load(n, mask=im, other=0.0).to(tl.float64)
    ny = tl.load(n + 1, mask=im, other=0.0).to(tl.float64)
    nz = tl.load(n + 2, mask=im, other=0.0).to(tl.float64)
    px, py, pz = px.to(tl.float64), py.to(tl.float64), pz.to(tl.float64)
    w = tl.where(inlier, 1.0, 0.0).to(tl.float64)
    r = nx * (px - qx) + ny * (py - qy) + nz * (pz - qz)
    col = tl.arange(0, 8)[None, :]
    J = tl.where(col == 0, (py * nz - pz * ny)[:, None], tl.where(col == 1, (pz * nx - px * nz)[:, None],
        tl.where(col == 2, (px * ny - py * nx)[:, None], tl.where(col == 3, nx[:, None],
        tl.where(col == 4, ny[:, None], tl.where(col == 5, nz[:, None], 0.0))))))
    J = J * w[:, None]
    A = tl.sum(J[:, :, None] * J[:, None, :], axis=0)            # [8, 8]
    g = tl.sum(J * r[:, None], axis=0)                            # [8]
    out = part + (b * n_blocks + blk) * 48
    row = tl.arange(0, 8)[:, None]
    col2 = tl.arange(0, 8)[None, :]
    tl.store(out + row * 6 + col2, A, mask=(row < 6) & (col2 < 6))
    c1 = tl.arange(0, 8)
    tl.store(out + 36 + c1, g, mask=c1 < 6)
    tl.store(out + 42, tl.sum(w * r * r, axis=0))
    tl.store(out + 43, tl.sum(w, axis=0))


@triton.jit
def _solve(part, work, x_out, stats, B, n_blocks, BLOCK_B: tl.constexpr):
    b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    bm = b < B
    for k in range(44):                                           # sum the partials into work[b]
        acc = tl.zeros([BLOCK_B], tl.float64)
        for c in range(n_blocks):
            acc += tl.load(part + (b * n_blocks + c) * 48 + k, mask=bm, other=0.0)
        tl.store(work + b * 48 + k, acc, mask=bm)
    tl.store(stats + b * 2, tl.load(work + b * 48 + 42, mask=bm, other=0.0), mask=bm)
    tl.store(stats + b * 2 + 1, tl.load(work + b * 48 + 43, mask=bm, other=0.0), mask=bm)
    L = work + b * 48                                             # Cholesky of A + 1e-9 I in place
    for k in tl.static_range(6):
        d = tl.load(L + k * 7, mask=bm, other=1.0) + 1e-9
        for p in tl.static_range(k):
            v = tl.load(L + k * 6 + p, mask=bm, other=0.0)
            d -= v * v
        lkk = tl.sqrt(d)
        tl.store(L + k * 7, lkk, mask=bm)
        for i in tl.static_range(k + 1, 6):
            acc = tl.load(L + i * 6 + k, mask=bm, other=0.0) + 0.0 * d
            for p in tl.static_range(k):
                acc -= tl.load(L + i * 6 + p, mask=bm, other=0.0) * tl.load(L + k * 6 + p, mask=bm, other=0.0)
            tl.store(L + i * 6 + k, acc / lkk, mask=bm)
    y = work + b * 48 + 36                                        # L y = -g, then L^T x = y
    for i in tl.static_range(6):
        acc = -tl.load(y + i, mask=bm, other=0.0)
        for p in tl.static_range(i):
            acc -= tl.load(L + i * 6 + p, mask=bm, other=0.0) * tl.load(y + p, mask=bm, other=0.0)
        tl.store(y + i, acc / tl.load(L + i * 7, mask=bm, other=1.0), mask=bm)
    for ii in tl.static_range(6):
        i = 5 - ii
        acc = tl.load(y + i, mask=bm, other=0.0)
        for p in tl.static_range(6 - ii, 6):  # i + 1; a local assigned from a constexpr is not one
            acc -= tl.load(L + p * 6 + i, mask=bm, other=0.0) * tl.load(y + p, mask=bm, other=0.0)
        xi = acc / tl.load(L + i * 7, mask=bm, other=1.0)
        tl.store(y + i, xi, mask=bm)
        tl.store(x_out + b * 6 + i, xi, mask=bm)


def so3_exp(omega):
    theta2 = (omega * omega).sum(-1)[..., None, None]
    theta = theta2.sqrt()
    small = theta < 1e-4
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(safe) / safe)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(safe)) / (safe * safe))
    x, y, z = omega.unbind(-1)
    zero = torch.zeros_like(x)
    k = torch.stack([torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1),
                     torch.stack([-y, x, zero], -1)], -2)
    return torch.eye(3, dtype=omega.dtype, device=omega.device) + a * k + b * (k @ k)


class ModelNew(nn.Module):
    def __init__(self, iters: int):
        super().__init__()
        self.iters = iters

    def forward(self, src, dst, dst_normals, d_max):
        B, N, _ = src.shape
        M = dst.shape[1]
        dev = src.device
        src, dst, nrm = src.contiguous(), dst.contiguous(), dst_normals.contiguous()
        BLOCK_N, BLOCK_M = 128, 64 if src.is_cuda else 256
        n_blocks = triton.cdiv(N, BLOCK_N)
        part = torch.empty(B * n_blocks * 48, dtype=torch.float64, device=dev)
        work = torch.empty(B * 48, dtype=torch.float64, device=dev)
        x = torch.empty(B, 6, dtype=torch.float64, device=dev)
        stats = torch.empty(B, 2, dtype=torch.float64, device=dev)
        pose = torch.eye(4, dtype=torch.float64, device=dev).repeat(B, 1, 1)
        d_max2 = float(d_max) ** 2
        for _ in range(self.iters):
            pose32 = pose[:, :3, :].to(src.dtype).contiguous()
            _nn_normal_equations[(B, n_blocks)](src, dst, nrm, pose32, d_max2, part, N, M, n_blocks,
                                                BLOCK_N=BLOCK_N, BLOCK_M=BLOCK_M)
            _solve[(triton.cdiv(B, 32),)](part, work, x, stats, B, n_blocks, BLOCK_B=32)
            step = torch.eye(4, dtype=torch.float64, device=dev).repeat(B, 1, 1)
            step[:, :3, :3] = so3_exp(x[:, :3])
            step[:, :3, 3] = x[:, 3:]
            pose = step @ pose
        count = stats[:, 1].round().long()
        rmse = (stats[:, 0] / count.clamp(min=1)).sqrt()
        return pose.to(src.dtype), rmse.to(src.dtype), count
