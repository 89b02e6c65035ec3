"""Oracle for graph/l1/uniform_random_walks: one Triton program per block of walks runs all L steps in
registers (the reference launches ~20 kernels per step); the counter-based hash is ported 1:1 in int64."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul32(a, c: tl.constexpr):
    # (a * c) mod 2^32 for a < 2^32, without int64 overflow (same split as orchestrator.runner.cbrng)
    return (a * (c & 0xFFFF) + (((a * (c >> 16)) & 0xFFFF) << 16)) & 0xFFFFFFFF


@triton.jit
def _hash32(x):
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


@triton.jit
def _walk_kernel(rowptr, col, starts, seed_ptr, out, n_walks, walk_length, BLOCK: tl.constexpr):
    w = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = w < n_walks
    w64 = w.to(tl.int64)
    cur = tl.load(starts + w64, mask=ok, other=0)
    stride = walk_length + 1
    tl.store(out + w64 * stride, cur, mask=ok)
    seed = tl.load(seed_ptr)
    h_seed = _hash32(seed & 0xFFFFFFFF)
    h_walk = _hash32(((h_seed + 0x9E3779B9) & 0xFFFFFFFF) ^ (w64 & 0xFFFFFFFF))
    for t in range(walk_length):
        h = _hash32(((h_walk + 0x9E3779B9) & 0xFFFFFFFF) ^ t)
        lo = tl.load(rowptr + cur, mask=ok, other=0)
        deg = tl.load(rowptr + cur + 1, mask=ok, other=0) - lo
        j = (h * deg) >> 32
        nxt = tl.load(col + lo + j, mask=ok & (deg > 0), other=0)
        cur = tl.where(deg > 0, nxt, cur)
        tl.store(out + w64 * stride + t + 1, cur, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, walk_length):
        super().__init__()
        self.walk_length = int(walk_length)

    def forward(self, rowptr, col, starts, seed):
        n_walks = starts.numel()
        out = torch.empty(n_walks, self.walk_length + 1, device=starts.device, dtype=torch.int64)
        block = 256
        _walk_kernel[(triton.cdiv(n_walks, block),)](rowptr, col, starts, seed.reshape(1), out, n_walks,
                                                     self.walk_length, BLOCK=block)
        return out
