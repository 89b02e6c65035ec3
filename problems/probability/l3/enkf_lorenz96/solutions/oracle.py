"""Oracle for probability/l3/enkf_lorenz96: one persistent Triton program per experiment.

Experiments are independent, so program e runs all C cycles of experiment e in one launch:
the RK4 forecast of each member block in registers (the cyclic neighbours come back through a
small per-block scratch, fenced by CTA barriers), then the analysis in three passes over the
members: the mean; S = Y^T Y / (N_e - 1) + r^2 I and Y^T A / (N_e - 1) with Y = H A (even
columns gathered straight from memory); S^-1 by in-register Gauss-Jordan (S is SPD, dy <= 80);
K^T = S^-1 Y^T A / (N_e - 1) and X_a = X + (D - H X) K^T, with the new mean accumulated on the way.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

FORCING = 8.0
DT = 0.01
INFLATION = 1.02


@triton.jit
def _tendency(x, scratch, rows, cols, n, mask):
    tl.store(scratch + rows[:, None] * n + cols[None, :], x, mask=mask)
    tl.debug_barrier()
    base = scratch + rows[:, None] * n
    x_next = tl.load(base + ((cols + 1) % n)[None, :], mask=mask, other=0.0)
    x_prev = tl.load(base + ((cols + n - 1) % n)[None, :], mask=mask, other=0.0)
    x_prev2 = tl.load(base + ((cols + n - 2) % n)[None, :], mask=mask, other=0.0)
    tl.debug_barrier()
    return (x_next - x_prev2) * x_prev - x + 8.0


@triton.jit
def _enkf(X, y, eps, scratch, means, members, n, dy, cycles, rk4_steps, experiments, obs_var,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_Y: tl.constexpr):
    e = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    obs = tl.arange(0, BLOCK_Y)
    col_ok = cols < n
    obs_ok = obs < dy
    X_e = X + e * members * n
    scratch_e = scratch + e * members * n
    # picks even column 2j of a [BLOCK_N] vector into slot j
    pick_even = (cols[None, :] == 2 * obs[:, None]).to(tl.float32)  # [BLOCK_Y, BLOCK_N]
    eye = (obs[:, None] == obs[None, :]).to(tl.float32)
    scale = 1.0 / (members - 1)
    for c in range(cycles):
        # forecast: k RK4 steps per member block
        for m0 in range(0, members, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            mask = (rows[:, None] < members) & col_ok[None, :]
            x = tl.load(X_e + rows[:, None] * n + cols[None, :], mask=mask, other=0.0)
            for _ in range(rk4_steps):
                k1 = _tendency(x, scratch_e, rows, cols, n, mask)
                k2 = _tendency(x + 0.005 * k1, scratch_e, rows, cols, n, mask)
                k3 = _tendency(x + 0.005 * k2, scratch_e, rows, cols, n, mask)
                k4 = _tendency(x + 0.01 * k3, scratch_e, rows, cols, n, mask)
                x = x + (0.01 / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            tl.store(X_e + rows[:, None] * n + cols[None, :], x, mask=mask)
        tl.debug_barrier()
        # analysis pass 1: ensemble mean
        total = tl.zeros([BLOCK_N], dtype=tl.float32)
        for m0 in range(0, members, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            mask = (rows[:, None] < members) & col_ok[None, :]
            total += tl.sum(tl.load(X_e + rows[:, None] * n + cols[None, :], mask=mask, other=0.0), axis=0)
        mean = total / members
        mean_obs = tl.sum(pick_even * mean[None, :], axis=1)  # H mean, [BLOCK_Y]
        # pass 2: S and Y^T A
        S = tl.zeros([BLOCK_Y, BLOCK_Y], dtype=tl.float32)
        YtA = tl.zeros([BLOCK_Y, BLOCK_N], dtype=tl.float32)
        for m0 in range(0, members, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            row_ok = rows < members
            mask = row_ok[:, None] & col_ok[None, :]
            mask_y = row_ok[:, None] & obs_ok[None, :]
            a = tl.where(mask, 1.02 * (tl.load(X_e + rows[:, None] * n + cols[None, :], mask=mask, other=0.0)
                                       - mean[None, :]), 0.0)
            ya = tl.where(mask_y, 1.02 * (tl.load(X_e + rows[:, None] * n + 2 * obs[None, :], mask=mask_y, other=0.0)
                                          - mean_obs[None, :]), 0.0)
            S = tl.dot(tl.trans(ya), ya, S, input_precision="ieee")
            YtA = tl.dot(tl.trans(ya), a, YtA, input_precision="ieee")
        S = S * scale + eye * tl.where(obs_ok, obs_var, 1.0)[:, None]
        # S^-1 by Gauss-Jordan (SPD: no pivoting); the padding block stays the identity
        inv = eye
        for j in range(dy):
            at_j = obs[:, None] == j
            pivot = tl.sum(tl.sum(tl.where(at_j & (obs[None, :] == j), S, 0.0), axis=1), axis=0)
            row_S = tl.sum(tl.where(at_j, S, 0.0), axis=0) / pivot
            row_inv = tl.sum(tl.where(at_j, inv, 0.0), axis=0) / pivot
            factor = tl.where(obs == j, 0.0, tl.sum(tl.where(obs[None, :] == j, S, 0.0), axis=1))
            S = tl.where(at_j, row_S[None, :], S - factor[:, None] * row_S[None, :])
            inv = tl.where(at_j, row_inv[None, :], inv - factor[:, None] * row_inv[None, :])
        gain_t = tl.dot(inv, YtA * scale, input_precision="ieee")  # K^T [BLOCK_Y, BLOCK_N]
        # pass 3: X_a = X_f(inflated) + (D - H X_f) K^T, and the analysis mean
        total = tl.zeros([BLOCK_N], dtype=tl.float32)
        for m0 in range(0, members, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            row_ok = rows < members
            mask = row_ok[:, None] & col_ok[None, :]
            mask_y = row_ok[:, None] & obs_ok[None, :]
            x = mean[None, :] + 1.02 * (tl.load(X_e + rows[:, None] * n + cols[None, :], mask=mask, other=0.0)
                                        - mean[None, :])
            hx = mean_obs[None, :] + 1.02 * (tl.load(X_e + rows[:, None] * n + 2 * obs[None, :], mask=mask_y,
                                                     other=0.0) - mean_obs[None, :])
            d = (tl.load(y + (c * experiments + e) * dy + obs, mask=obs_ok, other=0.0)[None, :]
                 + tl.load(eps + ((c * experiments + e) * members + rows[:, None]) * dy + obs[None, :], mask=mask_y,
                           other=0.0) - hx)
            d = tl.where(mask_y, d, 0.0)
            x = x + tl.dot(d, gain_t, input_precision="ieee")
            tl.debug_barrier()  # every thread has read this block before it is overwritten
            tl.store(X_e + rows[:, None] * n + cols[None, :], x, mask=mask)
            total += tl.sum(tl.where(mask, x, 0.0), axis=0)
        tl.store(means + (e * cycles + c) * n + cols, total / members, mask=col_ok)
        tl.debug_barrier()


class ModelNew(nn.Module):
    def forward(self, X0, y, eps, obs_std: float, rk4_steps: int):
        experiments, members, n = X0.shape
        cycles, _, dy = y.shape
        X = X0.clone().contiguous()
        scratch = torch.empty_like(X)
        means = torch.empty(experiments, cycles, n, dtype=X0.dtype, device=X0.device)
        block_n = max(16, triton.next_power_of_2(n))
        block_y = max(16, triton.next_power_of_2(dy))
        if X0.is_cuda:
            block_m = max(16, min(64, 4096 // block_n))
        else:  # the interpreter pays per loop trip, not per element: whole ensembles at once
            block_m = max(16, triton.next_power_of_2(members))
        _enkf[(experiments,)](X, y.contiguous(), eps.contiguous(), scratch, means, members, n, dy, cycles,
                              int(rk4_steps), experiments, float(obs_std) ** 2,
                              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_Y=block_y,
                              num_warps=4 if block_n * block_y <= 4096 else 8)
        return means, X
