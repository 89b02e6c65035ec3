"""Oracle for probability/l2/mala_sampler: every MALA step of a block of chains in one Triton kernel.

Each program owns BLOCK_C chains and keeps x, log pi(x), grad log pi(x) and the running sum in
registers for all S steps. log pi and its gradient at the proposal come from one pass over the
K components with an online logsumexp (a running max, the rescaled sum of exp and the rescaled
responsibility-weighted gradient), so no [C, K, d] intermediate is ever written.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _log_pi_grad(x, mu, inv_var, const, n_comp, d, cols, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr):
    col_ok = cols < d
    run_max = tl.full([BLOCK_C], float("-inf"), dtype=tl.float32)
    run_sum = tl.zeros([BLOCK_C], dtype=tl.float32)
    run_grad = tl.zeros([BLOCK_C, BLOCK_D], dtype=tl.float32)
    for k in range(n_comp):
        mu_k = tl.load(mu + k * d + cols, mask=col_ok, other=0.0)
        iv_k = tl.load(inv_var + k * d + cols, mask=col_ok, other=0.0)
        diff = mu_k[None, :] - x
        term = tl.load(const + k) - 0.5 * tl.sum(diff * diff * iv_k[None, :], axis=1)
        new_max = tl.maximum(run_max, term)
        scale = tl.exp(run_max - new_max)
        weight = tl.exp(term - new_max)
        run_sum = run_sum * scale + weight
        run_grad = run_grad * scale[:, None] + weight[:, None] * (diff * iv_k[None, :])
        run_max = new_max
    return run_max + tl.log(run_sum), run_grad / run_sum[:, None]


@triton.jit
def _mala(x0, xi, log_u, mu, inv_var, const, x_out, rate_out, mean_out, accepted, chains, d, n_comp, steps,
          eps, noise_scale, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cols = tl.arange(0, BLOCK_D)
    row_ok = rows < chains
    mask = row_ok[:, None] & (cols[None, :] < d)
    offs = rows[:, None] * d + cols[None, :]
    x = tl.load(x0 + offs, mask=mask, other=0.0)
    log_p, grad = _log_pi_grad(x, mu, inv_var, const, n_comp, d, cols, BLOCK_C, BLOCK_D)
    total = tl.zeros([BLOCK_C, BLOCK_D], dtype=tl.float32)
    n_acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    for s in range(steps):
        noise = tl.load(xi + s * chains * d + offs, mask=mask, other=0.0)
        prop = x + eps * grad + noise_scale * noise
        log_p_prop, grad_prop = _log_pi_grad(prop, mu, inv_var, const, n_comp, d, cols, BLOCK_C, BLOCK_D)
        fwd = tl.where(mask, prop - x - eps * grad, 0.0)
        bwd = tl.where(mask, x - prop - eps * grad_prop, 0.0)
        log_alpha = log_p_prop - log_p + (tl.sum(fwd * fwd, axis=1) - tl.sum(bwd * bwd, axis=1)) / (4.0 * eps)
        accept = tl.load(log_u + s * chains + rows, mask=row_ok, other=0.0) < log_alpha
        x = tl.where(accept[:, None], prop, x)
        log_p = tl.where(accept, log_p_prop, log_p)
        grad = tl.where(accept[:, None], grad_prop, grad)
        total += x
        n_acc += accept.to(tl.float32)
        tl.store(accepted + rows * steps + s, accept.to(tl.int8), mask=row_ok)
    tl.store(x_out + offs, x, mask=mask)
    tl.store(mean_out + offs, total / steps, mask=mask)
    tl.store(rate_out + rows, n_acc / steps, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self, log_w: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor):
        super().__init__()
        self.register_buffer("mu", mu.contiguous())
        self.register_buffer("inv_var", (1.0 / (sigma * sigma)).contiguous())
        self.register_buffer("const", (log_w - torch.log(sigma).sum(1)).contiguous())

    def forward(self, x0: torch.Tensor, xi: torch.Tensor, log_u: torch.Tensor, eps: float):
        steps, chains, d = xi.shape
        dev = x0.device
        x = torch.empty(chains, d, dtype=x0.dtype, device=dev)
        mean = torch.empty_like(x)
        rate = torch.empty(chains, dtype=x0.dtype, device=dev)
        accepted = torch.empty(chains, steps, dtype=torch.int8, device=dev)
        block_d = triton.next_power_of_2(d)
        # the interpreter (CPU) pays per program, not per element: one program there
        block_c = min(32, max(16, 2048 // block_d)) if x0.is_cuda else min(1024, triton.next_power_of_2(chains))
        _mala[(triton.cdiv(chains, block_c),)](
            x0.contiguous(), xi.contiguous(), log_u.contiguous(), self.mu, self.inv_var, self.const,
            x, rate, mean, accepted, chains, d, self.mu.shape[0], steps, float(eps), math.sqrt(2.0 * eps),
            BLOCK_C=block_c, BLOCK_D=block_d)
        return x, rate, mean, accepted.bool()
