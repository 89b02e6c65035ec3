"""Oracle for probability/l1/mcmc_ess_geyer: one Triton program per block of parameters, no FFT.

Truncation lags are short next to N, so the program computes the autocovariances directly, a block
of lags at a time (even and odd lags as two [param, s, pair] tiles, float64 accumulation), turns them
into the multi-chain rho_t, and runs Geyer's scan over the block's pairs with carried state (running
minimum of the pair sums, the monotone body sum), until every parameter of the block has met its
truncation pair. Work is O(C N lag_max) per parameter instead of a padded FFT over all N lags.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ess(draws, out, n_params, n, chains, pair_limit, min_tau, BLOCK_P: tl.constexpr, BLOCK_S: tl.constexpr,
         PAIRS: tl.constexpr, BLOCK_C: tl.constexpr):
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    p_ok = p < n_params
    rows = draws + p.to(tl.int64) * chains * n  # [BLOCK_P] row starts
    c_idx = tl.arange(0, BLOCK_C)
    s_idx = tl.arange(0, BLOCK_S)
    j = tl.arange(0, PAIRS)

    # chain means, and the draw range (ArviZ returns C N for constant draws)
    means = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float64)
    lo = tl.full([BLOCK_P], float("inf"), tl.float32)
    hi = tl.full([BLOCK_P], -float("inf"), tl.float32)
    for c in range(chains):
        total = tl.zeros([BLOCK_P], dtype=tl.float64)
        for s0 in range(0, n, BLOCK_S):
            s = s0 + s_idx
            ok = p_ok[:, None] & (s[None, :] < n)
            x = tl.load(rows[:, None] + c * n + s[None, :], mask=ok, other=0.0)
            total += tl.sum(x.to(tl.float64), 1)
            lo = tl.minimum(lo, tl.min(tl.where(ok, x, float("inf")), 1))
            hi = tl.maximum(hi, tl.max(tl.where(ok, x, -float("inf")), 1))
        means = tl.where(c_idx[None, :] == c, (total / n)[:, None], means)
    grand = tl.sum(means, 1) / chains
    spread = tl.where(c_idx[None, :] < chains, (means - grand[:, None]) * (means - grand[:, None]), 0.0)
    between = tl.sum(spread, 1) / tl.maximum(chains - 1, 1)

    body = tl.zeros([BLOCK_P], dtype=tl.float64)
    tail = tl.zeros([BLOCK_P], dtype=tl.float64)
    run_min = tl.full([BLOCK_P], float("inf"), tl.float64)
    mean_var = tl.zeros([BLOCK_P], dtype=tl.float64)
    var_plus = tl.full([BLOCK_P], 1.0, tl.float64)
    done = tl.where(p_ok, 0, 1)
    lag0 = 0
    while tl.min(done, 0) == 0:
        # autocovariances at lags lag0 + 2j (even) and lag0 + 2j + 1 (odd), averaged over chains
        even = tl.zeros([BLOCK_P, PAIRS], dtype=tl.float64)
        odd = tl.zeros([BLOCK_P, PAIRS], dtype=tl.float64)
        for c in range(chains):
            mean_c = tl.sum(tl.where(c_idx[None, :] == c, means, 0.0), 1)
            base = rows + c * n
            for s0 in range(0, n, BLOCK_S):
                s = s0 + s_idx
                ok = p_ok[:, None] & (s[None, :] < n)
                a = tl.load(base[:, None] + s[None, :], mask=ok, other=0.0).to(tl.float64) - mean_c[:, None]
                a = tl.where(ok, a, 0.0)
                lag = s[None, :, None] + lag0 + 2 * j[None, None, :]  # [1, S, PAIRS]
                ptr = base[:, None, None] + lag
                ok_e = p_ok[:, None, None] & (lag < n)
                ok_o = p_ok[:, None, None] & (lag + 1 < n)
                be = tl.where(ok_e, tl.load(ptr, mask=ok_e, other=0.0).to(tl.float64) - mean_c[:, None, None], 0.0)
                bo = tl.where(ok_o, tl.load(ptr + 1, mask=ok_o, other=0.0).to(tl.float64) - mean_c[:, None, None], 0.0)
                even += tl.sum(a[:, :, None] * be, 1)
                odd += tl.sum(a[:, :, None] * bo, 1)
        even = even / (n * chains)
        odd = odd / (n * chains)
        if lag0 == 0:
            mean_var = tl.sum(tl.where(j[None, :] == 0, even, 0.0), 1) * n / (n - 1.0)
            var_plus = tl.where(p_ok, mean_var * (n - 1.0) / n + tl.where(chains > 1, between, 0.0), 1.0)
        rho_even = 1.0 - (mean_var[:, None] - even) / var_plus[:, None]
        rho_odd = 1.0 - (mean_var[:, None] - odd) / var_plus[:, None]
        k = lag0 // 2 + j[None, :]
        rho_even = tl.where(k == 0, 1.0, rho_even)
        pair_sum = rho_even + rho_odd
        # Geyer: the scan stops at the first pair whose sum is <= 0, or at the pair limit
        stop = ((pair_sum <= 0) | (k == pair_limit)) & (k <= pair_limit)
        first = tl.min(tl.where(stop, j[None, :], PAIRS), 1)
        # monotone sequence: pair sums become their running minimum (triangular prefix min)
        upto = j[:, None] <= j[None, :]
        prefix_min = tl.min(tl.where(upto[None, :, :], pair_sum[:, :, None], float("inf")), 1)
        mins = tl.minimum(prefix_min, run_min[:, None])
        active = done == 0
        body += tl.where(active, tl.sum(tl.where(j[None, :] < first[:, None], mins, 0.0), 1), 0.0)
        last_even = tl.sum(tl.where(j[None, :] == first[:, None], rho_even, 0.0), 1)
        last_sum = tl.sum(tl.where(j[None, :] == first[:, None], pair_sum, 0.0), 1)
        found = active & (first < PAIRS)
        tail = tl.where(found & ((last_even > 0) | (last_sum >= 0)), last_even, tail)
        run_min = tl.minimum(run_min, tl.min(pair_sum, 1))
        done = tl.where(found, 1, done)
        lag0 += 2 * PAIRS
    tau = tl.maximum(-1.0 + 2.0 * body + tail, min_tau)
    ess = (chains * n) / tau
    constant = (hi - lo).to(tl.float64) < 1e-15
    ess = tl.where(constant, chains * n * 1.0, ess)
    tl.store(out + p, ess.to(tl.float32), mask=p_ok)


def ess_launch(draws: torch.Tensor, out: torch.Tensor, on_gpu: bool) -> tuple[tuple, tuple, dict]:
    """Grid, arguments and constexprs of _ess. (No kernel argument may be named `params`: Triton's
    GPU launcher binds the arguments in a generated function whose local dict of that name shadows
    it, "failed to specialize argument of type: dict"; the interpreter never runs that binder.)"""
    n_params, chains, n = draws.shape
    block_p, block_s, pairs = (1, 128, 16) if on_gpu else (64, 512, 32)
    args = (draws, out, n_params, n, chains, max((n - 3) // 2, 0), 1.0 / math.log10(chains * n))
    meta = dict(BLOCK_P=block_p, BLOCK_S=block_s, PAIRS=pairs, BLOCK_C=triton.next_power_of_2(chains))
    return (triton.cdiv(n_params, block_p),), args, meta


class ModelNew(nn.Module):
    def forward(self, draws: torch.Tensor) -> torch.Tensor:
        out = torch.empty(draws.shape[0], dtype=torch.float32, device=draws.device)
        grid, args, meta = ess_launch(draws.contiguous(), out, draws.is_cuda)
        _ess[grid](*args, **meta)
        return out.to(draws.dtype)
