"""Oracle for probability/l2/hmc_leapfrog: every transition of a block of chains in one Triton kernel.

Each program owns BLOCK_C chains and keeps theta, p and the gradient in registers for all
M transitions and L leapfrog steps. One gradient is a single streaming pass over X
(L2-resident): z = q X^T and the residual sigmoid(z) - y never leave the chip, and the
same pass accumulates U when the energy is needed. 3xTF32 tensor-core products keep
float32 accuracy, which the Metropolis decisions need.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _grad_energy(q, X, y, n, d, NEED_U: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    cols = tl.arange(0, BLOCK_D)
    grad = tl.zeros([BLOCK_C, BLOCK_D], dtype=tl.float32)
    energy = tl.zeros([BLOCK_C], dtype=tl.float32)
    for n0 in range(0, n, BLOCK_N):
        idx = n0 + tl.arange(0, BLOCK_N)
        ok = idx < n
        xk = tl.load(X + idx[:, None] * d + cols[None, :], mask=ok[:, None] & (cols[None, :] < d), other=0.0)
        yk = tl.load(y + idx, mask=ok, other=0.0)
        z = tl.dot(q, tl.trans(xk), input_precision="tf32x3")  # [BLOCK_C, BLOCK_N]
        resid = tl.where(ok[None, :], 1.0 / (1.0 + tl.exp(-z)) - yk[None, :], 0.0)
        grad = tl.dot(resid, xk, grad, input_precision="tf32x3")
        if NEED_U:
            softplus = tl.where(z > 20.0, z, tl.log(1.0 + tl.exp(tl.minimum(z, 20.0))))
            energy += tl.sum(tl.where(ok[None, :], softplus - yk[None, :] * z, 0.0), axis=1)
    grad += q
    energy += 0.5 * tl.sum(q * q, axis=1)
    return grad, energy


@triton.jit
def _hmc(X, y, theta0, eps, momenta, log_u, samples, accepted, chains, n, d, transitions, leapfrog,
         BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cols = tl.arange(0, BLOCK_D)
    row_ok = rows < chains
    mask = row_ok[:, None] & (cols[None, :] < d)
    theta = tl.load(theta0 + rows[:, None] * d + cols[None, :], mask=mask, other=0.0)
    step = tl.load(eps + rows, mask=row_ok, other=0.0)[:, None]
    for m in range(transitions):
        p0 = tl.load(momenta + (m * chains + rows[:, None]) * d + cols[None, :], mask=mask, other=0.0)
        grad, u0 = _grad_energy(theta, X, y, n, d, True, BLOCK_C, BLOCK_D, BLOCK_N)
        h0 = u0 + 0.5 * tl.sum(p0 * p0, axis=1)
        q = theta
        p = p0 - 0.5 * step * grad
        for _ in range(leapfrog - 1):
            q = q + step * p
            grad, _unused = _grad_energy(q, X, y, n, d, False, BLOCK_C, BLOCK_D, BLOCK_N)
            p = p - step * grad
        q = q + step * p
        grad, u1 = _grad_energy(q, X, y, n, d, True, BLOCK_C, BLOCK_D, BLOCK_N)
        p = p - 0.5 * step * grad
        h1 = u1 + 0.5 * tl.sum(p * p, axis=1)
        accept = tl.load(log_u + m * chains + rows, mask=row_ok, other=0.0) < h0 - h1
        theta = tl.where(accept[:, None], q, theta)
        tl.store(samples + (rows[:, None] * transitions + m) * d + cols[None, :], theta, mask=mask)
        tl.store(accepted + rows * transitions + m, accept.to(tl.int8), mask=row_ok)


class ModelNew(nn.Module):
    def forward(self, X, y, theta0, eps, momenta, log_u, leapfrog: int):
        n, d = X.shape
        transitions, chains, _ = momenta.shape
        samples = torch.empty(chains, transitions, d, dtype=theta0.dtype, device=X.device)
        accepted = torch.empty(chains, transitions, dtype=torch.int8, device=X.device)
        block_d = max(16, triton.next_power_of_2(d))
        block_c = 16 if X.is_cuda else 64
        block_n = 64 if block_d <= 64 else 32
        _hmc[(triton.cdiv(chains, block_c),)](X.contiguous(), y, theta0.contiguous(), eps, momenta.contiguous(),
                                              log_u.contiguous(), samples, accepted, chains, n, d, transitions,
                                              leapfrog, BLOCK_C=block_c, BLOCK_D=block_d, BLOCK_N=block_n)
        return samples, accepted.bool()
