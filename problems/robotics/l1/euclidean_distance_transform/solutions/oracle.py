"""Oracle for robotics/l1/euclidean_distance_transform: one Triton kernel per axis.

A program owns BLOCK_L lines of the current axis and keeps their running minima
g(x) = min_k f(k) + (x - k)^2 in registers (int32 is exact here: f <= 2^30 and
(x - k)^2 < 2^19), so the reference's [lines, n, n] int64 temporaries never exist.
The first pass reads the occupancy bytes directly.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

FAR = 2 ** 30


@triton.jit
def _edt_pass(src, dst, n_lines, n, inner, FROM_OCC: tl.constexpr, FAR_C: tl.constexpr,
              BLOCK_L: tl.constexpr, NP: tl.constexpr):
    line = tl.program_id(0) * BLOCK_L + tl.arange(0, BLOCK_L)[:, None]
    lm = line < n_lines
    base = (line // inner) * (n * inner) + line % inner         # element (line, 0); step `inner` along the axis
    x = tl.arange(0, NP)[None, :]
    best = tl.full([BLOCK_L, NP], 2147483647, tl.int32)
    for k in range(n):
        fk = tl.load(src + base + k * inner, mask=lm, other=0).to(tl.int32)
        if FROM_OCC:
            fk = tl.where(fk != 0, 0, FAR_C)
        best = tl.minimum(best, fk + (x - k) * (x - k))
    tl.store(dst + base + x * inner, best, mask=lm & (x < n))


class ModelNew(nn.Module):
    def forward(self, occ):
        B, X, Y, Z = occ.shape
        occ_bytes = occ.contiguous().view(torch.uint8)
        first = torch.empty(B, X, Y, Z, device=occ.device, dtype=torch.int32)
        second = torch.empty_like(first)
        if occ.numel() == 0:
            return first
        src, from_occ = occ_bytes, True
        for n, inner, dst in ((Z, 1, first), (Y, Z, second), (X, Y * Z, first)):
            n_lines = occ.numel() // n
            NP = triton.next_power_of_2(n)
            BLOCK_L = max(1, (4096 if occ.is_cuda else 65536) // NP)
            _edt_pass[(triton.cdiv(n_lines, BLOCK_L),)](src, dst, n_lines, n, inner, FROM_OCC=from_occ,
                                                        FAR_C=FAR, BLOCK_L=BLOCK_L, NP=NP)
            src, from_occ = dst, False
        return first
