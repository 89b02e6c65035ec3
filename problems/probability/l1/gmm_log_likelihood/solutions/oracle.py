"""Oracle for probability/l1/gmm_log_likelihood: one Triton kernel, no [N, K, D] temporaries.

Each program owns a block of points: for every component it forms z = (x - mu_k) L_k^-T
chunk by chunk on tensor cores (3xTF32), reduces ||z||^2 on the fly, and keeps an online
logsumexp over components; the joint log-densities go straight into the resp output and are
normalised in place by a second sweep of the same program.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gmm(X, means, prec, const, log_prob, resp, n, dim, n_comp,
         BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n
    rows64 = rows.to(tl.int64)
    run_max = tl.full([BLOCK_N], -float("inf"), tl.float32)
    run_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(n_comp):
        sq = tl.zeros([BLOCK_N], dtype=tl.float32)
        for d0 in range(0, dim, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            z = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
            for e0 in range(0, dim, BLOCK_E):
                e = e0 + tl.arange(0, BLOCK_E)
                emask = e < dim
                x = tl.load(X + rows64[:, None] * dim + e[None, :], mask=row_ok[:, None] & emask[None, :], other=0.0)
                mu = tl.load(means + k * dim + e, mask=emask, other=0.0)
                diff = tl.where(emask[None, :], x - mu[None, :], 0.0)
                pt = tl.load(prec + (k * dim + d[None, :]).to(tl.int64) * dim + e[:, None],
                             mask=(d[None, :] < dim) & emask[:, None], other=0.0)  # L^-1 transposed chunk
                z = tl.dot(diff, pt, z, input_precision="tf32x3")
            sq += tl.sum(z * z, axis=1)
        joint = tl.load(const + k) - 0.5 * sq
        tl.store(resp + rows64 * n_comp + k, joint, mask=row_ok)
        new_max = tl.maximum(run_max, joint)
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.exp(joint - new_max)
        run_max = new_max
    lp = run_max + tl.log(run_sum)
    tl.store(log_prob + rows, lp, mask=row_ok)
    tl.debug_barrier()
    for k0 in range(0, n_comp, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] & (kk[None, :] < n_comp)
        ptr = resp + rows64[:, None] * n_comp + kk[None, :]
        tl.store(ptr, tl.exp(tl.load(ptr, mask=mask, other=0.0) - lp[:, None]), mask=mask)


class ModelNew(nn.Module):
    def forward(self, X, log_weights, means, scale_tril):
        n, dim = X.shape
        n_comp = means.shape[0]
        eye = torch.eye(dim, dtype=torch.float64, device=X.device).expand(n_comp, dim, dim)
        prec = torch.linalg.solve_triangular(scale_tril.double(), eye, upper=False).to(X.dtype).contiguous()
        const = (log_weights - torch.log(torch.diagonal(scale_tril, dim1=1, dim2=2)).sum(1)
                 - 0.5 * dim * math.log(2 * math.pi)).contiguous()
        log_prob = torch.empty(n, dtype=X.dtype, device=X.device)
        resp = torch.empty(n, n_comp, dtype=X.dtype, device=X.device)
        block_d = max(16, min(64, triton.next_power_of_2(dim)))
        block_n = 64 if X.is_cuda else 256
        _gmm[(triton.cdiv(n, block_n),)](X.contiguous(), means.contiguous(), prec, const, log_prob, resp,
                                         n, dim, n_comp, BLOCK_N=block_n, BLOCK_D=block_d, BLOCK_E=block_d,
                                         BLOCK_K=min(64, triton.next_power_of_2(n_comp)))
        return log_prob, resp
