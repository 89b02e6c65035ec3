"""Oracle for probability/l2/sinkhorn_log_domain: flash-style Triton half-iterations.

Each half-iteration is one kernel: a program owns a block of rows (or columns), streams the other
side in tiles, recomputes C from exact differences in registers and keeps an online logsumexp
(running max and rescaled sum), so C is never stored. A last kernel forms the transport cost per
row block; the per-block partial sums are added in a fixed order.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cost_tile(x_ptr, y_ptr, rows, cols, row_ok, col_ok, dim, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    c = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for d in range(dim):
        xd = tl.load(x_ptr + rows * dim + d, mask=row_ok, other=0.0)
        yd = tl.load(y_ptr + cols * dim + d, mask=col_ok, other=0.0)
        diff = xd[:, None] - yd[None, :]
        c += diff * diff
    return c


@triton.jit
def _half_step(own_pts, other_pts, other_pot, other_logw, out_pot, n_own, n_other, dim, eps_ptr,
               BLOCK_OWN: tl.constexpr, BLOCK_OTHER: tl.constexpr):
    """out_i = -eps logsumexp_j((pot_j - C_ij) / eps + logw_j) for this program's block of i."""
    b = tl.program_id(0).to(tl.int64)
    own = tl.program_id(1) * BLOCK_OWN + tl.arange(0, BLOCK_OWN)
    own_ok = own < n_own
    eps = tl.load(eps_ptr)
    own_base = own_pts + b * n_own * dim
    other_base = other_pts + b * n_other * dim
    run_max = tl.full([BLOCK_OWN], -float("inf"), tl.float32)
    run_sum = tl.zeros([BLOCK_OWN], dtype=tl.float32)
    for start in range(0, n_other, BLOCK_OTHER):
        other = start + tl.arange(0, BLOCK_OTHER)
        other_ok = other < n_other
        pot = tl.load(other_pot + b * n_other + other, mask=other_ok, other=0.0)
        logw = tl.load(other_logw + b * n_other + other, mask=other_ok, other=0.0)
        c = _cost_tile(own_base, other_base, own, other, own_ok, other_ok, dim, BLOCK_OWN, BLOCK_OTHER)
        z = (pot[None, :] + eps * logw[None, :] - c) / eps
        z = tl.where(other_ok[None, :], z, -float("inf"))
        new_max = tl.maximum(run_max, tl.max(z, 1))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(z - new_max[:, None]), 1)
        run_max = new_max
    tl.store(out_pot + b * n_own + own, -eps * (run_max + tl.log(run_sum)), mask=own_ok)


@triton.jit
def _transport_cost(x, y, f, g, log_a, log_b, partial, n, m, dim, eps_ptr, BLOCK_I: tl.constexpr,
                    BLOCK_J: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1)
    i = blk * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < n
    eps = tl.load(eps_ptr)
    fi = tl.load(f + b * n + i, mask=i_ok, other=0.0)
    lai = tl.load(log_a + b * n + i, mask=i_ok, other=0.0)
    acc = tl.zeros([BLOCK_I], dtype=tl.float32)
    for start in range(0, m, BLOCK_J):
        j = start + tl.arange(0, BLOCK_J)
        j_ok = j < m
        gj = tl.load(g + b * m + j, mask=j_ok, other=0.0)
        lbj = tl.load(log_b + b * m + j, mask=j_ok, other=0.0)
        c = _cost_tile(x + b * n * dim, y + b * m * dim, i, j, i_ok, j_ok, dim, BLOCK_I, BLOCK_J)
        plan = tl.exp((fi[:, None] + gj[None, :] - c) / eps + lai[:, None] + lbj[None, :])
        acc += tl.sum(tl.where(i_ok[:, None] & j_ok[None, :], plan * c, 0.0), 1)
    tl.store(partial + b * tl.num_programs(1) + blk, tl.sum(acc, 0))


class ModelNew(nn.Module):
    def __init__(self, iters: int):
        super().__init__()
        self.iters = iters

    def forward(self, x, y, log_a, log_b, eps):
        batch, n, dim = x.shape
        m = y.shape[1]
        x, y, log_a, log_b = x.contiguous(), y.contiguous(), log_a.contiguous(), log_b.contiguous()
        eps = eps.reshape(1).to(x.dtype)
        block = 64 if x.is_cuda else 256
        f = torch.zeros_like(log_a)
        g = torch.zeros_like(log_b)
        rows, cols = (batch, triton.cdiv(n, block)), (batch, triton.cdiv(m, block))
        for _ in range(self.iters):
            _half_step[rows](x, y, g, log_b, f, n, m, dim, eps, BLOCK_OWN=block, BLOCK_OTHER=block)
            _half_step[cols](y, x, f, log_a, g, m, n, dim, eps, BLOCK_OWN=block, BLOCK_OTHER=block)
        partial = torch.empty(batch, rows[1], dtype=x.dtype, device=x.device)
        _transport_cost[rows](x, y, f, g, log_a, log_b, partial, n, m, dim, eps, BLOCK_I=block, BLOCK_J=block)
        return f, g, partial.sum(1)
