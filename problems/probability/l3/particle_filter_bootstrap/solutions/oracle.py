"""Oracle for probability/l3/particle_filter_bootstrap: the whole filter in one Triton kernel.

One program per sequence runs all T steps: pass 1 propagates, weights and keeps an online
logsumexp; pass 2 normalises, accumulates the mean and sum W^2, and writes the float64 CDF
by a chunked scan; when ESS < N/2, pass 3 binary-searches each slot's position in the CDF and
gathers into the other half of a ping-pong particle buffer. Float64 throughout, like the
reference, so resampling ancestors agree.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


# Triton specialises integer arguments equal to 1 into Python constants (which have no
# .to()): batch, n and steps must stay tensors.
@triton.jit(do_not_specialize=["batch", "n", "steps", "search_iters"])
def _particle_filter(y, x0, v, u, drift, consts, xbuf, logw, cdf, means, log_z,
                     batch, n, steps, search_iters, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    sigma_v = tl.load(consts)  # float64 constants come from memory: scalar float arguments are float32
    log_norm = tl.load(consts + 1)
    log_n = tl.load(consts + 2)
    lanes = tl.arange(0, BLOCK)
    row = b.to(tl.int64) * n
    plane = batch.to(tl.int64) * n
    for c in range(0, n, BLOCK):
        i = c + lanes
        m = i < n
        tl.store(xbuf + row + i, tl.load(x0 + row + i, mask=m, other=0.0).to(tl.float64), mask=m)
        tl.store(logw + row + i, tl.zeros([BLOCK], dtype=tl.float64) - log_n, mask=m)
    tl.debug_barrier()
    cur = 0
    lz = tl.zeros([1], dtype=tl.float64)
    total_n = n.to(tl.float64)
    for t in range(steps):
        xa = xbuf + cur * plane + row
        yt = tl.load(y + b * steps + t).to(tl.float64)
        dt = tl.load(drift + t)
        noise = v + t * plane + row
        # pass 1: propagate, weight, online logsumexp
        run_max = tl.full([], -float("inf"), tl.float64)
        run_sum = tl.full([], 0.0, tl.float64)
        for c in range(0, n, BLOCK):
            i = c + lanes
            m = i < n
            x = tl.load(xa + i, mask=m, other=0.0)
            x = 0.5 * x + 25.0 * x / (1.0 + x * x) + dt + sigma_v * tl.load(noise + i, mask=m, other=0.0).to(tl.float64)
            resid = yt - x * x / 20.0
            lw = tl.load(logw + row + i, mask=m, other=0.0) - 0.5 * (resid * resid) - log_norm
            tl.store(xa + i, x, mask=m)
            tl.store(logw + row + i, lw, mask=m)
            lw = tl.where(m, lw, -float("inf"))
            new_max = tl.maximum(run_max, tl.max(lw, axis=0))
            run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(lw - new_max), axis=0)
            run_max = new_max
        lse = run_max + tl.log(run_sum)
        lz += lse
        tl.debug_barrier()
        # pass 2: normalise, mean, sum of squares, CDF
        mean = tl.full([], 0.0, tl.float64)
        squares = tl.full([], 0.0, tl.float64)
        carry = tl.full([], 0.0, tl.float64)
        for c in range(0, n, BLOCK):
            i = c + lanes
            m = i < n
            lw = tl.load(logw + row + i, mask=m, other=0.0) - lse
            tl.store(logw + row + i, lw, mask=m)
            w = tl.where(m, tl.exp(lw), 0.0)
            mean += tl.sum(w * tl.load(xa + i, mask=m, other=0.0), axis=0)
            squares += tl.sum(w * w, axis=0)
            cum = tl.cumsum(w, axis=0) + carry
            tl.store(cdf + row + i, cum, mask=m)
            carry = tl.max(cum, axis=0)  # the last entry: a prefix sum of non-negative terms is monotone
        tl.store(means + b * steps + t, mean.to(means.dtype.element_ty))
        tl.debug_barrier()
        if 1.0 / squares < 0.5 * total_n:
            # pass 3: systematic resampling, searchsorted(cdf / cdf[-1], (u + i) / n, right=True)
            offset = tl.load(u + t * batch + b).to(tl.float64)
            xn = xbuf + (1 - cur) * plane + row
            for c in range(0, n, BLOCK):
                i = c + lanes
                m = i < n
                pos = (offset + i.to(tl.float64)) / total_n
                lo = tl.zeros([BLOCK], dtype=tl.int32)
                hi = tl.zeros([BLOCK], dtype=tl.int32) + n
                for _ in range(search_iters):
                    active = lo < hi
                    mid = (lo + hi) // 2
                    value = tl.load(cdf + row + mid, mask=active & m, other=0.0) / carry
                    right = value <= pos
                    lo = tl.where(active & right, mid + 1, lo)
                    hi = tl.where(active & (~right), mid, hi)
                ancestor = tl.minimum(lo, n - 1)
                tl.store(xn + i, tl.load(xa + ancestor, mask=m, other=0.0), mask=m)
                tl.store(logw + row + i, tl.zeros([BLOCK], dtype=tl.float64) - log_n, mask=m)
            cur = 1 - cur
            tl.debug_barrier()
    tl.store(log_z + b + tl.arange(0, 1), lz.to(log_z.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, y: torch.Tensor, x0: torch.Tensor, v: torch.Tensor, u: torch.Tensor):
        batch, steps = y.shape
        n = x0.shape[1]
        dev = x0.device
        drift = torch.tensor([8 * math.cos(1.2 * (t + 1)) for t in range(steps)], dtype=torch.float64, device=dev)
        xbuf = torch.empty(2, batch, n, dtype=torch.float64, device=dev)
        logw = torch.empty(batch, n, dtype=torch.float64, device=dev)
        cdf = torch.empty(batch, n, dtype=torch.float64, device=dev)
        means = torch.empty(batch, steps, dtype=x0.dtype, device=dev)
        log_z = torch.empty(batch, dtype=x0.dtype, device=dev)
        consts = torch.tensor([math.sqrt(10.0), math.log(1.0 * math.sqrt(2 * math.pi)), math.log(n)],
                              dtype=torch.float64, device=dev)
        block = min(1024, triton.next_power_of_2(n))
        search_iters = int(math.ceil(math.log2(n + 1)))
        _particle_filter[(batch,)](y.contiguous(), x0.contiguous(), v.contiguous(), u.contiguous(), drift, consts,
                                   xbuf, logw, cdf, means, log_z, batch, n, steps, search_iters,
                                   BLOCK=block, num_warps=8)
        return means, log_z
