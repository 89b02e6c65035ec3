"""Oracle for probability/l1/systematic_resampling: two Triton kernels.

1. One program per system: the maximum log-weight, then a float64 running prefix sum of
   exp(log_w - max) block by block (tl.cumsum plus a carried total) into a CDF scratch row.
2. One program per (system, block of slots): a fixed-depth binary search of (u + k)/N in the
   normalised CDF (the first i with cdf_i > position, clamped to N - 1), then the particle gather.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _prefix_cdf(log_w, cdf, total, n, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    row = log_w + b * n
    top = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        top = tl.maximum(top, tl.load(row + idx, mask=idx < n, other=-float("inf")))
    top_value = tl.max(top, 0).to(tl.float64)
    carry = tl.zeros([1], dtype=tl.float64)
    out = cdf + b * n
    for start in range(0, n, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        x = tl.load(row + idx, mask=idx < n, other=-float("inf")).to(tl.float64)
        w = tl.exp(x - top_value)
        running = tl.cumsum(w, 0) + carry
        tl.store(out + idx, running, mask=idx < n)
        carry += tl.sum(w, 0)
    tl.store(total + b + tl.arange(0, 1), carry)


@triton.jit
def _search_gather(cdf, total, u, particles, ancestors, resampled, n, dim, STEPS: tl.constexpr,
                   BLOCK: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    slot = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = slot < n
    row = cdf + b * n
    scale = tl.load(total + b)
    position = (tl.load(u + b).to(tl.float64) + slot.to(tl.float64)) / n
    lo = tl.zeros([BLOCK], dtype=tl.int32)
    hi = tl.zeros([BLOCK], dtype=tl.int32) + (n - 1)
    for _ in range(STEPS):
        mid = (lo + hi) // 2
        value = tl.load(row + mid, mask=ok, other=0.0)
        above = (value / scale) > position
        hi = tl.where(above, mid, hi)
        lo = tl.where(above, lo, tl.minimum(mid + 1, hi))
    tl.store(ancestors + b * n + slot, lo.to(tl.int64), mask=ok)
    d = tl.arange(0, BLOCK_D)
    both = ok[:, None] & (d[None, :] < dim)
    src = particles + (b * n + lo.to(tl.int64))[:, None] * dim + d[None, :]
    values = tl.load(src, mask=both, other=0.0)
    tl.store(resampled + (b * n + slot.to(tl.int64))[:, None] * dim + d[None, :], values, mask=both)


class ModelNew(nn.Module):
    def forward(self, log_w: torch.Tensor, u: torch.Tensor, particles: torch.Tensor):
        batch, n = log_w.shape
        dim = particles.shape[2]
        log_w, u, particles = log_w.contiguous(), u.contiguous(), particles.contiguous()
        cdf = torch.empty(batch, n, dtype=torch.float64, device=log_w.device)
        total = torch.empty(batch, dtype=torch.float64, device=log_w.device)
        ancestors = torch.empty(batch, n, dtype=torch.int64, device=log_w.device)
        resampled = torch.empty_like(particles)
        _prefix_cdf[(batch,)](log_w, cdf, total, n, BLOCK=1024)
        block = 256 if log_w.is_cuda else 1024
        steps = max(1, (n - 1).bit_length())
        _search_gather[(batch, triton.cdiv(n, block))](cdf, total, u, particles, ancestors, resampled, n, dim,
                                                      STEPS=steps, BLOCK=block,
                                                      BLOCK_D=triton.next_power_of_2(dim))
        return ancestors, resampled
