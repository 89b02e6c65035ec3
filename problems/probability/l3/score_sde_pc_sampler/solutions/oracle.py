"""Oracle for probability/l3/score_sde_pc_sampler: nine Triton launches per noise level.

Each score evaluation is three GEMM kernels with fused bias + SiLU (the Fourier-feature half of
the first layer is folded into a per-level bias table, computed once) and an output GEMM whose
epilogue does the rest of the level in registers: the score (out / sigma - x / (1 + sigma^2)),
the counter-based Box-Muller noise and the predictor update, or, for the corrector, the score and
the per-row norms of g and z' (atomically summed for the batch means). A last elementwise kernel
applies the corrector step, regenerating z' from the hash. GEMMs use 3xTF32 for float32 accuracy.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

SNR = 0.16


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
def _normal(seed_ptr, counter, rows, cols, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """cb_normal(seed, counter, row, col): Box-Muller on the uniforms with suffixes 0 and 1."""
    seed = (tl.load(seed_ptr) & 0xFFFFFFFF).to(tl.uint32)
    zero = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.uint32)
    h = _chain(_chain(_hash32(seed), counter + zero), rows.to(tl.uint32) + zero)
    h = _chain(h, cols.to(tl.uint32) + zero)
    u0 = ((_chain(h, zero) >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07
    u1 = ((_chain(h, zero + 1) >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07
    return tl.sqrt(-2.0 * tl.log(u0)) * tl.cos(6.283185307179586 * u1)


@triton.jit
def _gemm_tile(A, W, M, N, K, stride_a, stride_w, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(A + rows[:, None] * stride_a + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(W + cols[:, None] * stride_w + ks[None, :], mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)
        acc = tl.dot(a, tl.trans(w), acc, input_precision="tf32x3")
    return acc


@triton.jit
def _linear_silu(A, W, bias, out, M, N, K, stride_a, stride_w, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = _gemm_tile(A, W, M, N, K, stride_a, stride_w, rows, cols, BLOCK_M, BLOCK_N, BLOCK_K)
    acc += tl.load(bias + cols, mask=cols < N, other=0.0)[None, :]
    acc = acc / (1.0 + tl.exp(-acc))
    tl.store(out + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _output_layer(H3, W_out, b_out, x, seed_ptr, x_out, g_out, norms, M, D, Hd, inv_sigma, prior_scale,
                  var_step, noise_scale, counter, PREDICTOR: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < M) & (cols[None, :] < D)
    offs = rows[:, None] * D + cols[None, :]
    acc = _gemm_tile(H3, W_out, M, D, Hd, Hd, Hd, rows, cols, BLOCK_M, BLOCK_D, BLOCK_K)
    acc += tl.load(b_out + cols, mask=cols < D, other=0.0)[None, :]
    xv = tl.load(x + offs, mask=mask, other=0.0)
    score = acc * inv_sigma - xv * prior_scale
    z = _normal(seed_ptr, counter, rows[:, None], cols[None, :], BLOCK_M, BLOCK_D)
    if PREDICTOR:
        tl.store(x_out + offs, xv + var_step * score + noise_scale * z, mask=mask)
    else:
        score = tl.where(mask, score, 0.0)
        z = tl.where(mask, z, 0.0)
        tl.store(g_out + offs, score, mask=mask)
        row_ok = rows < M
        tl.atomic_add(norms, tl.sum(tl.where(row_ok, tl.sqrt(tl.sum(score * score, axis=1)), 0.0), axis=0))
        tl.atomic_add(norms + 1, tl.sum(tl.where(row_ok, tl.sqrt(tl.sum(z * z, axis=1)), 0.0), axis=0))


@triton.jit
def _corrector_update(x, g, norms, seed_ptr, M, D, counter, snr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < M) & (cols[None, :] < D)
    offs = rows[:, None] * D + cols[None, :]
    ratio = snr * tl.load(norms + 1) / tl.load(norms)  # the batch means' 1/B cancels
    eps = 2.0 * ratio * ratio
    z = _normal(seed_ptr, counter, rows[:, None], cols[None, :], BLOCK_M, BLOCK_D)
    xv = tl.load(x + offs, mask=mask, other=0.0)
    tl.store(x + offs, xv + eps * tl.load(g + offs, mask=mask, other=0.0) + tl.sqrt(2.0 * eps) * z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, **weights: torch.Tensor):
        super().__init__()
        for name, value in weights.items():
            self.register_buffer(name, value.contiguous())

    def _bias_table(self, sigmas: list[float]) -> torch.Tensor:
        """b1 + W1[:, D:] [sin, cos](2 pi w log sigma) for every level (the first layer's
        Fourier-feature half depends on sigma only)."""
        dim = self.w_out.shape[0]
        log_sig = torch.tensor([math.log(s) for s in sigmas], dtype=self.w1.dtype, device=self.w1.device)
        angles = 2 * math.pi * log_sig[:, None] * self.gff_w[None, :]
        feats = torch.cat([torch.sin(angles), torch.cos(angles)], 1)
        return (feats @ self.w1[:, dim:].T + self.b1).contiguous()

    def forward(self, x_init, seed, sigma_min: float, sigma_max: float, n_levels: int):
        batch, dim = x_init.shape
        hidden = self.w2.shape[0]
        dev = x_init.device
        ratio = sigma_min / sigma_max
        sig = [sigma_max * ratio ** (i / (n_levels - 1)) for i in range(n_levels)] + [0.0]
        table = self._bias_table(sig[:n_levels])
        x = x_init.clone().contiguous()
        x_next = torch.empty_like(x)
        g = torch.empty_like(x)
        h_a = torch.empty(batch, hidden, dtype=x.dtype, device=dev)
        h_b = torch.empty_like(h_a)
        norms = torch.zeros(n_levels, 2, dtype=x.dtype, device=dev)
        block_d = max(16, triton.next_power_of_2(dim))
        if x.is_cuda:
            block_m, block_n, block_k = 64, 64, 32
            block_m_out = 32 if block_d <= 128 else 16
        else:  # the interpreter pays per program and per loop trip: whole matrices at once
            block_m = block_m_out = min(256, max(16, triton.next_power_of_2(batch)))
            block_n = block_k = min(256, max(16, triton.next_power_of_2(max(hidden, dim))))
        grid_h = (triton.cdiv(batch, block_m), triton.cdiv(hidden, block_n))
        grid_out = (triton.cdiv(batch, block_m_out),)

        def hidden_layers(inp, level):
            _linear_silu[grid_h](inp, self.w1, table[level], h_a, batch, hidden, dim, dim, self.w1.shape[1],
                                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
            _linear_silu[grid_h](h_a, self.w2, self.b2, h_b, batch, hidden, hidden, hidden, hidden,
                                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
            _linear_silu[grid_h](h_b, self.w3, self.b3, h_a, batch, hidden, hidden, hidden, hidden,
                                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
            return h_a

        for i in range(n_levels):
            var_step = sig[i] ** 2 - sig[i + 1] ** 2
            h3 = hidden_layers(x, i)
            _output_layer[grid_out](h3, self.w_out, self.b_out, x, seed, x_next, g, norms[i], batch, dim, hidden,
                                    1.0 / sig[i], 1.0 / (1.0 + sig[i] ** 2), var_step, math.sqrt(var_step), 2 * i,
                                    PREDICTOR=True, BLOCK_M=block_m_out, BLOCK_D=block_d, BLOCK_K=block_k)
            x, x_next = x_next, x
            if sig[i + 1] > 0:
                h3 = hidden_layers(x, i + 1)
                _output_layer[grid_out](h3, self.w_out, self.b_out, x, seed, x_next, g, norms[i], batch, dim,
                                        hidden, 1.0 / sig[i + 1], 1.0 / (1.0 + sig[i + 1] ** 2), 0.0, 0.0, 2 * i + 1,
                                        PREDICTOR=False, BLOCK_M=block_m_out, BLOCK_D=block_d, BLOCK_K=block_k)
                _corrector_update[grid_out](x, g, norms[i], seed, batch, dim, 2 * i + 1, SNR,
                                            BLOCK_M=block_m_out, BLOCK_D=block_d)
        return x
