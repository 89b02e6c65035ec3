"""Oracle for probability/l2/gibbs_gaussian_mixture: two Triton kernels per sweep.

assign: each program takes BLOCK_N points, walks the K components with the points in registers
(squared distance, the counter-based hash and the Gumbel transform inline, running argmax), writes
z and adds its one-hot partial counts and sums (a one-hot GEMM, exact in IEEE float32) to the
sweep's accumulators with atomics. update: one program draws the new means and evaluates the log
joint from the same sufficient statistics, sum_i ||x_i - mu_{z_i}||^2 =
sum ||x||^2 - 2 sum_k mu_k . s_k + sum_k n_k ||mu_k||^2, in float64.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _hash32(x):
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


@triton.jit
def _chain(h, counter):
    return _hash32((h + 0x9E3779B9) ^ counter)


@triton.jit
def _assign(X, log_pi, mu, seed_ptr, z_out, counts, sums, n, d, n_comp, sweep, inv_two_sigma2,
            BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_D)
    row_ok = rows < n
    col_ok = cols < d
    x = tl.load(X + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    x_sq = tl.sum(x * x, axis=1)
    seed = (tl.load(seed_ptr) & 0xFFFFFFFF).to(tl.uint32)
    h_sweep = _chain(_hash32(seed), sweep + tl.zeros([1], dtype=tl.uint32))
    h_row = _chain(h_sweep, rows.to(tl.uint32))
    best = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
    best_k = tl.zeros([BLOCK_N], dtype=tl.int32)
    for k in range(n_comp):
        mu_k = tl.load(mu + k * d + cols, mask=col_ok, other=0.0)
        dist = x_sq - 2.0 * tl.sum(x * mu_k[None, :], axis=1) + tl.sum(mu_k * mu_k, axis=0)
        bits = _chain(h_row, k + tl.zeros([BLOCK_N], dtype=tl.uint32))
        u = ((bits >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07
        score = tl.load(log_pi + k) - dist * inv_two_sigma2 - tl.log(-tl.log(u))
        better = score > best  # strict: ties keep the lowest k, like argmax
        best = tl.where(better, score, best)
        best_k = tl.where(better, k, best_k)
    tl.store(z_out + rows, best_k.to(tl.int64), mask=row_ok)
    comps = tl.arange(0, BLOCK_K)
    one_hot = ((best_k[:, None] == comps[None, :]) & row_ok[:, None]).to(tl.float32)  # [BLOCK_N, BLOCK_K]
    part_sums = tl.dot(tl.trans(one_hot), x, input_precision="ieee")  # [BLOCK_K, BLOCK_D]
    part_counts = tl.sum(one_hot, axis=0)
    comp_ok = comps < n_comp
    tl.atomic_add(counts + comps, part_counts, mask=comp_ok)
    tl.atomic_add(sums + comps[:, None] * d + cols[None, :], part_sums, mask=comp_ok[:, None] & col_ok[None, :])


@triton.jit
def _update(counts, sums, xi, log_pi, mu, joint_out, stats, d, n_comp, sigma2, tau2,
            BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    comps = tl.arange(0, BLOCK_K)
    cols = tl.arange(0, BLOCK_D)
    comp_ok = comps < n_comp
    mask = comp_ok[:, None] & (cols[None, :] < d)
    offs = comps[:, None] * d + cols[None, :]
    n_k = tl.load(counts + comps, mask=comp_ok, other=0.0)
    s_k = tl.load(sums + offs, mask=mask, other=0.0)
    precision = 1.0 / tau2 + n_k / sigma2
    new_mu = (s_k / sigma2) / precision[:, None] + tl.load(xi + offs, mask=mask, other=0.0) / tl.sqrt(precision)[:, None]
    new_mu = tl.where(mask, new_mu, 0.0)
    tl.store(mu + offs, new_mu, mask=mask)
    m64, s64, n64 = new_mu.to(tl.float64), s_k.to(tl.float64), n_k.to(tl.float64)
    x_sq_total = tl.load(stats)  # float64: sum ||x||^2 and the normalising constants
    const = tl.load(stats + 1)
    resid_sq = x_sq_total - 2.0 * tl.sum(tl.sum(m64 * s64, axis=1), axis=0) + tl.sum(n64 * tl.sum(m64 * m64, axis=1), axis=0)
    lp = tl.load(log_pi + comps, mask=comp_ok, other=0.0).to(tl.float64)
    joint = (tl.sum(n64 * lp, axis=0) - resid_sq / (2.0 * sigma2) - tl.sum(tl.sum(m64 * m64, axis=1), axis=0) / (2.0 * tau2)
             + const)
    tl.store(joint_out, joint.to(tl.float32))


class ModelNew(nn.Module):
    def forward(self, X, log_pi, mu0, xi, seed, sigma2: float, tau2: float):
        n, d = X.shape
        sweeps, k, _ = xi.shape
        dev = X.device
        X, xi = X.contiguous(), xi.contiguous()
        mu = mu0.clone().contiguous()
        z = torch.empty(n, dtype=torch.int64, device=dev)
        counts = torch.zeros(sweeps, k, dtype=torch.float32, device=dev)
        sums = torch.zeros(sweeps, k, d, dtype=torch.float32, device=dev)
        joints = torch.empty(sweeps, dtype=torch.float32, device=dev)
        const = -0.5 * n * d * math.log(2 * math.pi * sigma2) - 0.5 * k * d * math.log(2 * math.pi * tau2)
        stats = torch.stack([(X.double() * X.double()).sum(), torch.tensor(const, dtype=torch.float64, device=dev)])
        block_d = max(16, triton.next_power_of_2(d))
        block_k = max(16, triton.next_power_of_2(k))
        # the interpreter (CPU) pays per program, not per element: few large programs there
        block_n = (64 if block_d * block_k <= 4096 else 32) if X.is_cuda else min(4096, triton.next_power_of_2(n))
        warps = 8 if block_d * block_k >= 8192 else 4
        for g in range(sweeps):
            _assign[(triton.cdiv(n, block_n),)](X, log_pi, mu, seed, z, counts[g], sums[g], n, d, k, g,
                                                0.5 / sigma2, BLOCK_N=block_n, BLOCK_D=block_d, BLOCK_K=block_k,
                                                num_warps=warps)
            _update[(1,)](counts[g], sums[g], xi[g], log_pi, mu, joints[g:], stats, d, k, float(sigma2),
                          float(tau2), BLOCK_K=block_k, BLOCK_D=block_d, num_warps=warps)
        return mu, z, joints
