"""Oracle for probability/l2/hmc_leapfrog: one Triton launch per gradient, spread over the GPU.

The reference makes about 2,200 small launches per call (launch-bound on the H200). The first
oracle ran everything in one kernel with a program per 16 chains: 64 programs on 132 SMs, each
a serial chain of small dots, which lost to the reference on a quiet host (0.70x, ninth
session). Here every gradient evaluation is one launch over (chain blocks x slices of the data):
a program evaluates z = q X^T, sigmoid(z) - y and the gradient on its slice with 3xTF32 dots
(float32 accuracy, which the Metropolis decisions need) and adds its share into the gradient
(and the energy, when needed) with atomics. The leapfrog update that the previous gradient
allows runs in the next launch's prologue, repeated by each slice's program for its chains;
slice 0 writes the state. State is double-buffered (programs of one launch read one buffer,
slice 0 writes the other), gradients triple-buffered (one read, one accumulated, one zeroed).
Launch k of a transition m evaluates at leapfrog position s (0: at theta; L: the end point);
the launch after the last one finishes the last transition.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["k", "m", "s"])
def _hmc_step(X, y, eps, momenta, log_u, Qb, Pb, Tb, Hb, Gb, Ub, samples, accepted,
              chains, n, d, transitions, leapfrog, split_n, k, m, s,
              DO_GRAD: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr):
    cb = tl.program_id(0)
    part = tl.program_id(1)
    rows = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cols = tl.arange(0, BLOCK_D)
    row_ok = rows < chains
    mask = row_ok[:, None] & (cols[None, :] < d)
    off = rows[:, None] * d + cols[None, :]
    size = chains * d
    src = k % 2
    dst = 1 - src
    prev = (k + 2) % 3  # the gradient of the previous launch, complete
    q = tl.load(Qb + src * size + off, mask=mask, other=0.0)
    p = tl.load(Pb + src * size + off, mask=mask, other=0.0)
    theta = tl.load(Tb + src * size + off, mask=mask, other=0.0)
    h0 = tl.load(Hb + src * chains + rows, mask=row_ok, other=0.0)
    g_prev = tl.load(Gb + prev * size + off, mask=mask, other=0.0)
    u_prev = tl.load(Ub + prev * chains + rows, mask=row_ok, other=0.0)
    step = tl.load(eps + rows, mask=row_ok, other=0.0)[:, None]
    if s == 0:
        if m > 0:  # the end point's half kick, then transition m - 1's Metropolis decision
            p = p - 0.5 * step * g_prev
            h1 = u_prev + 0.5 * tl.sum(p * p, axis=1)
            accept = tl.load(log_u + (m - 1) * chains + rows, mask=row_ok, other=0.0) < h0 - h1
            theta = tl.where(accept[:, None], q, theta)
            if part == 0:
                tl.store(samples + (rows[:, None] * transitions + (m - 1)) * d + cols[None, :], theta, mask=mask)
                tl.store(accepted + rows * transitions + (m - 1), accept.to(tl.int8), mask=row_ok)
        if m < transitions:  # transition m starts at theta with fresh momenta
            q = theta
            p = tl.load(momenta + (m * chains + rows[:, None]) * d + cols[None, :], mask=mask, other=0.0)
    elif s == 1:  # U(theta) is complete: the starting energy, then the first half kick and drift
        h0 = u_prev + 0.5 * tl.sum(p * p, axis=1)
        p = p - 0.5 * step * g_prev
        q = q + step * p
    else:  # a full kick with the last gradient, then a drift
        p = p - step * g_prev
        q = q + step * p
    if part == 0:
        tl.store(Qb + dst * size + off, q, mask=mask)
        tl.store(Pb + dst * size + off, p, mask=mask)
        tl.store(Tb + dst * size + off, theta, mask=mask)
        tl.store(Hb + dst * chains + rows, h0, mask=row_ok)
        zero = (k + 1) % 3  # accumulated by the next launch
        tl.store(Gb + zero * size + off, tl.zeros([BLOCK_C, BLOCK_D], dtype=tl.float32), mask=mask)
        tl.store(Ub + zero * chains + rows, tl.zeros([BLOCK_C], dtype=tl.float32), mask=row_ok)
    if DO_GRAD:
        need_u = (s == 0) | (s == leapfrog)
        grad = tl.zeros([BLOCK_C, BLOCK_D], dtype=tl.float32)
        energy = tl.zeros([BLOCK_C], dtype=tl.float32)
        start = part * split_n
        for n0 in range(start, start + split_n, BLOCK_N):
            idx = n0 + tl.arange(0, BLOCK_N)
            ok = idx < n
            xk = tl.load(X + idx[:, None] * d + cols[None, :], mask=ok[:, None] & (cols[None, :] < d), other=0.0)
            yk = tl.load(y + idx, mask=ok, other=0.0)
            z = tl.dot(q, tl.trans(xk), input_precision="tf32x3")  # [BLOCK_C, BLOCK_N]
            resid = tl.where(ok[None, :], 1.0 / (1.0 + tl.exp(-z)) - yk[None, :], 0.0)
            grad = tl.dot(resid, xk, grad, input_precision="tf32x3")
            if need_u:
                softplus = tl.where(z > 20.0, z, tl.log(1.0 + tl.exp(tl.minimum(z, 20.0))))
                energy += tl.sum(tl.where(ok[None, :], softplus - yk[None, :] * z, 0.0), axis=1)
        if part == 0:  # the prior's terms, once
            grad += q
            energy += 0.5 * tl.sum(q * q, axis=1)
        now = k % 3
        tl.atomic_add(Gb + now * size + off, grad, mask=mask)
        if need_u:
            tl.atomic_add(Ub + now * chains + rows, energy, mask=row_ok)


def _blocks(d: int) -> tuple[int, int, int]:
    block_d = max(16, triton.next_power_of_2(d))
    if block_d <= 64:
        return 64, block_d, 64
    return (32, block_d, 32) if block_d <= 128 else (16, block_d, 32)


class ModelNew(nn.Module):
    def forward(self, X, y, theta0, eps, momenta, log_u, leapfrog: int):
        n, d = X.shape
        transitions, chains, _ = momenta.shape
        block_c, block_d, block_n = _blocks(d)
        chain_blocks = triton.cdiv(chains, block_c)
        # enough programs for about two per SM; on a CPU two slices, so the split path runs there too
        wanted = 2 * torch.cuda.get_device_properties(X.device).multi_processor_count if X.is_cuda else 2 * chain_blocks
        parts = max(1, min(triton.cdiv(n, block_n), triton.cdiv(wanted, chain_blocks)))
        split_n = triton.cdiv(triton.cdiv(n, parts), block_n) * block_n
        parts = triton.cdiv(n, split_n)
        f32 = dict(dtype=torch.float32, device=X.device)
        state = [torch.zeros(2, chains, d, **f32) for _ in range(3)]  # q, p, theta
        state[2][0] = theta0
        h = torch.zeros(2, chains, **f32)
        g = torch.zeros(3, chains, d, **f32)
        u = torch.zeros(3, chains, **f32)
        samples = torch.empty(chains, transitions, d, **f32)
        accepted = torch.empty(chains, transitions, dtype=torch.int8, device=X.device)
        args = (X.contiguous(), y.contiguous(), eps.contiguous(), momenta.contiguous(), log_u.contiguous(),
                *state, h, g, u, samples, accepted, chains, n, d, transitions, leapfrog, split_n)
        k = 0
        for m in range(transitions):
            for s in range(leapfrog + 1):
                _hmc_step[(chain_blocks, parts)](*args, k, m, s, DO_GRAD=True,
                                                 BLOCK_C=block_c, BLOCK_D=block_d, BLOCK_N=block_n)
                k += 1
        _hmc_step[(chain_blocks, 1)](*args, k, transitions, 0, DO_GRAD=False,
                                     BLOCK_C=block_c, BLOCK_D=block_d, BLOCK_N=block_n)
        return samples, accepted.bool()
