"""Oracle for probability/l2/gp_posterior_cholesky: one Triton program per GP task.

Inside the program (scratch L [n, n], V [n, m], z [n] in global memory, block size BS):
1. the lower tiles of K = k(X, X) + sn2 I, built from exact differences;
2. a blocked right-looking Cholesky: the diagonal block factored in registers, the panel solved
   against it, the trailing lower tiles updated with IEEE float32 tl.dot;
3. z = L \\ y by blocked forward substitution (|z|^2 = y^T alpha gives lml with sum log diag L);
4. V = L \\ K* per tile of test points, K* built on the fly, with mu = V^T z (= K*^T alpha) and
   var = sf2 - sum V^2 accumulated as the blocks are solved, so alpha and V never leave the task.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _se_tile(a_ptr, b_ptr, ls_ptr, rows, cols, rows_ok, cols_ok, dim, sf2, R: tl.constexpr, C: tl.constexpr):
    d2 = tl.zeros([R, C], dtype=tl.float32)
    for d in range(dim):
        length = tl.load(ls_ptr + d)
        a = tl.load(a_ptr + rows * dim + d, mask=rows_ok, other=0.0) / length
        b = tl.load(b_ptr + cols * dim + d, mask=cols_ok, other=0.0) / length
        diff = a[:, None] - b[None, :]
        d2 += diff * diff
    return sf2 * tl.exp(-0.5 * d2)


@triton.jit
def _diag_block(Lg, k0, n, BS: tl.constexpr):
    """The diagonal block L[k0:k0+BS, k0:k0+BS], identity where it runs past n."""
    r = tl.arange(0, BS)
    rows = k0 + r
    ok = (rows[:, None] < n) & (rows[None, :] < n)
    a = tl.load(Lg + rows[:, None] * n + rows[None, :], mask=ok, other=0.0)
    return tl.where(ok, a, tl.where(r[:, None] == r[None, :], 1.0, 0.0))


@triton.jit
def _gp(x, y, xs, ls, sf2_ptr, sn2_ptr, L, V, z, mean, var, lml, n, m, dim, log_2pi,
        BS: tl.constexpr, BM: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    xg, xsg, lsg = x + g * n * dim, xs + g * m * dim, ls + g * dim
    Lg, Vg, zg = L + g * n * n, V + g * n * m, z + g * n
    sf2 = tl.load(sf2_ptr + g)
    sn2 = tl.load(sn2_ptr + g)
    r = tl.arange(0, BS)
    eye = r[:, None] == r[None, :]

    # 1. lower tiles of K + sn2 I
    for i0 in range(0, n, BS):
        rows = i0 + r
        for j0 in range(0, i0 + 1, BS):
            cols = j0 + r
            tile = _se_tile(xg, xg, lsg, rows, cols, rows < n, cols < n, dim, sf2, BS, BS)
            tile += tl.where(rows[:, None] == cols[None, :], sn2, 0.0)
            tl.store(Lg + rows[:, None] * n + cols[None, :], tile, mask=(rows[:, None] < n) & (cols[None, :] < n))
    tl.debug_barrier()

    # 2. blocked right-looking Cholesky
    logdet = tl.zeros([1], dtype=tl.float32)
    for k0 in range(0, n, BS):
        rows = k0 + r
        a = _diag_block(Lg, k0, n, BS)
        for j in range(BS):
            a_jj = tl.sum(tl.sum(tl.where(eye & (r[:, None] == j), a, 0.0), 1), 0)
            d = tl.sqrt(a_jj)
            col = tl.where(r >= j, tl.sum(tl.where(r[None, :] == j, a, 0.0), 1) / d, 0.0)
            a = tl.where((r[None, :] == j) & (r[:, None] >= j), col[:, None], a)
            a = tl.where((r[:, None] > j) & (r[None, :] > j), a - col[:, None] * col[None, :], a)
            logdet += tl.where(k0 + j < n, tl.log(d), 0.0)
        lower = (rows[:, None] < n) & (rows[None, :] < n) & (r[:, None] >= r[None, :])
        tl.store(Lg + rows[:, None] * n + rows[None, :], a, mask=lower)
        for i0 in range(k0 + BS, n, BS):  # panel: X L11^T = A21
            prow = i0 + r
            pmask = (prow[:, None] < n) & (rows[None, :] < n)
            xt = tl.load(Lg + prow[:, None] * n + rows[None, :], mask=pmask, other=0.0)
            for j in range(BS):
                lrow = tl.sum(tl.where(r[:, None] == j, a, 0.0), 0)
                l_jj = tl.sum(tl.where(r == j, lrow, 0.0), 0)
                done = tl.sum(tl.where(r[None, :] < j, xt * lrow[None, :], 0.0), 1)
                xj = (tl.sum(tl.where(r[None, :] == j, xt, 0.0), 1) - done) / l_jj
                xt = tl.where(r[None, :] == j, xj[:, None], xt)
            tl.store(Lg + prow[:, None] * n + rows[None, :], xt, mask=pmask)
        tl.debug_barrier()
        for i0 in range(k0 + BS, n, BS):  # trailing lower tiles: A22 -= L21 L21^T
            ri = i0 + r
            li = tl.load(Lg + ri[:, None] * n + rows[None, :], mask=(ri[:, None] < n) & (rows[None, :] < n), other=0.0)
            for j0 in range(k0 + BS, i0 + 1, BS):
                rj = j0 + r
                lj = tl.load(Lg + rj[:, None] * n + rows[None, :], mask=(rj[:, None] < n) & (rows[None, :] < n), other=0.0)
                tmask = (ri[:, None] < n) & (rj[None, :] < n)
                t = tl.load(Lg + ri[:, None] * n + rj[None, :], mask=tmask, other=0.0)
                t -= tl.dot(li, tl.trans(lj), input_precision="ieee")
                tl.store(Lg + ri[:, None] * n + rj[None, :], t, mask=tmask)
        tl.debug_barrier()

    # 3. z = L \ y
    zz = tl.zeros([1], dtype=tl.float32)
    for k0 in range(0, n, BS):
        rows = k0 + r
        rhs = tl.load(y + g * n + rows, mask=rows < n, other=0.0)
        for j0 in range(0, k0, BS):
            cols = j0 + r
            lt = tl.load(Lg + rows[:, None] * n + cols[None, :], mask=(rows[:, None] < n), other=0.0)
            rhs -= tl.sum(lt * tl.load(zg + cols)[None, :], 1)
        a = _diag_block(Lg, k0, n, BS)
        zb = rhs
        for j in range(BS):
            lrow = tl.sum(tl.where(r[:, None] == j, a, 0.0), 0)
            l_jj = tl.sum(tl.where(r == j, lrow, 0.0), 0)
            val = (tl.sum(tl.where(r == j, zb, 0.0), 0) - tl.sum(tl.where(r < j, lrow * zb, 0.0), 0)) / l_jj
            zb = tl.where(r == j, val, zb)
        tl.store(zg + rows, zb, mask=rows < n)
        zz += tl.sum(tl.where(rows < n, zb * zb, 0.0), 0)
        tl.debug_barrier()
    tl.store(lml + g + tl.arange(0, 1), -0.5 * zz - logdet - 0.5 * n * log_2pi)

    # 4. V = L \ K*, mu = V^T z, var = sf2 - sum V^2, one tile of test points at a time
    for m0 in range(0, m, BM):
        cols = m0 + tl.arange(0, BM)
        cols_ok = cols < m
        mu = tl.zeros([BM], dtype=tl.float32)
        v2 = tl.zeros([BM], dtype=tl.float32)
        for k0 in range(0, n, BS):
            rows = k0 + r
            rhs = _se_tile(xg, xsg, lsg, rows, cols, rows < n, cols_ok, dim, sf2, BS, BM)
            rhs = tl.where(rows[:, None] < n, rhs, 0.0)
            for j0 in range(0, k0, BS):
                prev = j0 + r
                lt = tl.load(Lg + rows[:, None] * n + prev[None, :], mask=rows[:, None] < n, other=0.0)
                vt = tl.load(Vg + prev[:, None] * m + cols[None, :], mask=cols_ok[None, :], other=0.0)
                rhs -= tl.dot(lt, vt, input_precision="ieee")
            a = _diag_block(Lg, k0, n, BS)
            for j in range(BS):
                lrow = tl.sum(tl.where(r[:, None] == j, a, 0.0), 0)
                l_jj = tl.sum(tl.where(r == j, lrow, 0.0), 0)
                done = tl.sum(tl.where(r[:, None] < j, lrow[:, None] * rhs, 0.0), 0)
                val = (tl.sum(tl.where(r[:, None] == j, rhs, 0.0), 0) - done) / l_jj
                rhs = tl.where(r[:, None] == j, val[None, :], rhs)
            tl.store(Vg + rows[:, None] * m + cols[None, :], rhs, mask=(rows[:, None] < n) & cols_ok[None, :])
            zb = tl.load(zg + rows, mask=rows < n, other=0.0)
            mu += tl.sum(rhs * zb[:, None], 0)
            v2 += tl.sum(rhs * rhs, 0)
            tl.debug_barrier()
        tl.store(mean + g * m + cols, mu, mask=cols_ok)
        tl.store(var + g * m + cols, sf2 - v2, mask=cols_ok)


class ModelNew(nn.Module):
    def forward(self, x, y, x_test, lengthscales, signal_var, noise_var):
        tasks, n, dim = x.shape
        m = x_test.shape[1]
        dev, dt = x.device, x.dtype
        scratch_l = torch.empty(tasks, n, n, dtype=dt, device=dev)
        scratch_v = torch.empty(tasks, n, m, dtype=dt, device=dev)
        scratch_z = torch.empty(tasks, n, dtype=dt, device=dev)
        mean = torch.empty(tasks, m, dtype=dt, device=dev)
        var = torch.empty(tasks, m, dtype=dt, device=dev)
        lml = torch.empty(tasks, dtype=dt, device=dev)
        _gp[(tasks,)](x.contiguous(), y.contiguous(), x_test.contiguous(), lengthscales.contiguous(),
                      signal_var.contiguous(), noise_var.contiguous(), scratch_l, scratch_v, scratch_z,
                      mean, var, lml, n, m, dim, math.log(2 * math.pi), BS=32, BM=64)
        return mean, var, lml
