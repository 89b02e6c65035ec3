"""Oracle for probability/l2/kalman_filter: the whole filter in one Triton kernel.

Each program owns BLOCK_S systems for all T steps and keeps m and P in registers (padded to
powers of two). Small products are broadcast-multiply-reduce; the innovation system
S [K^T | S^-1 e] = [H P | e] is solved by Gauss-Jordan elimination without pivoting (S is
symmetric positive definite), whose pivots are the squared Cholesky diagonal, so
log det S comes for free. Only the filtered means are written per step.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mm(a, b):  # [S, I, K] @ [S or 1, K, J] -> [S, I, J]
    return tl.sum(a[:, :, :, None] * b[:, None, :, :], axis=2)


@triton.jit
def _mm_nt(a, b):  # [S, I, K] @ [S or 1, J, K]^T -> [S, I, J]
    return tl.sum(a[:, :, None, :] * b[:, None, :, :], axis=3)


@triton.jit
def _kalman(y, obs_mask, m0, P0, Fm, Hm, Qm, Rm, means, P_out, loglik, n_sys, steps, dx, dy, log_2pi,
            BLOCK_S: tl.constexpr, DX: tl.constexpr, DY: tl.constexpr):
    sys_ = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    s_ok = sys_ < n_sys
    sys64 = sys_.to(tl.int64)
    ix = tl.arange(0, DX)
    iy = tl.arange(0, DY)
    # shared matrices as [1, rows, cols], zero-padded
    Fs = tl.load(Fm + ix[:, None] * dx + ix[None, :], mask=(ix[:, None] < dx) & (ix[None, :] < dx), other=0.0)[None, :, :]
    Qs = tl.load(Qm + ix[:, None] * dx + ix[None, :], mask=(ix[:, None] < dx) & (ix[None, :] < dx), other=0.0)[None, :, :]
    Hs = tl.load(Hm + iy[:, None] * dx + ix[None, :], mask=(iy[:, None] < dy) & (ix[None, :] < dx), other=0.0)[None, :, :]
    Rs = tl.load(Rm + iy[:, None] * dy + iy[None, :], mask=(iy[:, None] < dy) & (iy[None, :] < dy), other=0.0)[None, :, :]
    pad_eye = tl.where((iy[:, None] == iy[None, :]) & (iy[:, None] >= dy), 1.0, 0.0)[None, :, :]
    eye = tl.where(ix[:, None] == ix[None, :], 1.0, 0.0)[None, :, :]
    m = tl.load(m0 + sys64[:, None] * dx + ix[None, :], mask=s_ok[:, None] & (ix[None, :] < dx), other=0.0)
    P = tl.zeros([BLOCK_S, DX, DX], dtype=tl.float32) + \
        tl.load(P0 + ix[:, None] * dx + ix[None, :], mask=(ix[:, None] < dx) & (ix[None, :] < dx), other=0.0)[None, :, :]
    ll = tl.zeros([BLOCK_S], dtype=tl.float32)
    for t in range(steps):
        m = tl.sum(Fs * m[:, None, :], axis=2)
        P = _mm_nt(_mm(Fs + tl.zeros([BLOCK_S, DX, DX], dtype=tl.float32), P), Fs) + Qs
        HP = _mm(Hs + tl.zeros([BLOCK_S, DY, DX], dtype=tl.float32), P)  # [S, DY, DX]
        S = _mm_nt(HP, Hs) + Rs + pad_eye
        e0 = tl.load(y + (sys64[:, None] * steps + t) * dy + iy[None, :], mask=s_ok[:, None] & (iy[None, :] < dy),
                     other=0.0) - tl.sum(Hs * m[:, None, :], axis=2)
        B = HP
        e = e0
        logdet = tl.zeros([BLOCK_S], dtype=tl.float32)
        for k in range(dy):  # Gauss-Jordan on [S | H P | e]
            is_k = (iy == k)
            srow = tl.sum(tl.where(is_k[None, :, None], S, 0.0), axis=1)  # [S, DY]
            brow = tl.sum(tl.where(is_k[None, :, None], B, 0.0), axis=1)  # [S, DX]
            erow = tl.sum(tl.where(is_k[None, :], e, 0.0), axis=1)  # [S]
            pivot = tl.sum(tl.where(is_k[None, :], srow, 0.0), axis=1)
            logdet += tl.log(pivot)
            scol = tl.sum(tl.where(is_k[None, None, :], S, 0.0), axis=2)  # [S, DY]: column k
            factor = tl.where(is_k[None, :], 0.0, scol / pivot[:, None])
            S = tl.where(is_k[None, :, None], S / pivot[:, None, None], S - factor[:, :, None] * srow[:, None, :])
            B = tl.where(is_k[None, :, None], B / pivot[:, None, None], B - factor[:, :, None] * brow[:, None, :])
            e = tl.where(is_k[None, :], e / pivot[:, None], e - factor * erow[:, None])
        # B = S^-1 H P = K^T, e = S^-1 e0
        mahal = tl.sum(e0 * e, axis=1)
        m_upd = m + tl.sum(B * e0[:, :, None], axis=1)
        KH = tl.sum(B[:, :, :, None] * Hs[:, :, None, :], axis=1)  # [S, DX, DX]
        A = eye - KH
        RB = _mm(Rs + tl.zeros([BLOCK_S, DY, DY], dtype=tl.float32), B)  # [S, DY, DX]
        KRK = tl.sum(B[:, :, :, None] * RB[:, :, None, :], axis=1)
        P_upd = _mm_nt(_mm(A, P), A) + KRK
        seen = tl.load(obs_mask + sys64 * steps + t, mask=s_ok, other=0) != 0
        m = tl.where(seen[:, None], m_upd, m)
        P = tl.where(seen[:, None, None], P_upd, P)
        ll += tl.where(seen, -0.5 * (mahal + logdet + dy * log_2pi), 0.0)
        tl.store(means + (sys64[:, None] * steps + t) * dx + ix[None, :], m, mask=s_ok[:, None] & (ix[None, :] < dx))
    tl.store(P_out + sys64[:, None, None] * dx * dx + ix[None, :, None] * dx + ix[None, None, :], P,
             mask=s_ok[:, None, None] & (ix[None, :, None] < dx) & (ix[None, None, :] < dx))
    tl.store(loglik + sys_, ll, mask=s_ok)


class ModelNew(nn.Module):
    def __init__(self, F, H, Q, R):
        super().__init__()
        for name, value in (("F", F), ("H", H), ("Q", Q), ("R", R)):
            self.register_buffer(name, value)

    def forward(self, y: torch.Tensor, obs_mask: torch.Tensor, m0: torch.Tensor, P0: torch.Tensor):
        n_sys, steps, dy = y.shape
        dx = m0.shape[1]
        dev = y.device
        means = torch.empty(n_sys, steps, dx, dtype=y.dtype, device=dev)
        P_out = torch.empty(n_sys, dx, dx, dtype=y.dtype, device=dev)
        loglik = torch.empty(n_sys, dtype=y.dtype, device=dev)
        DX, DY = max(2, triton.next_power_of_2(dx)), max(2, triton.next_power_of_2(dy))
        block_s = max(1, 2048 // DX**3) if y.is_cuda else 256
        _kalman[(triton.cdiv(n_sys, block_s),)](y.contiguous(), obs_mask.to(torch.int8).contiguous(), m0.contiguous(),
                                                P0.contiguous(), self.F.contiguous(), self.H.contiguous(),
                                                self.Q.contiguous(), self.R.contiguous(), means, P_out, loglik,
                                                n_sys, steps, dx, dy, math.log(2 * math.pi),
                                                BLOCK_S=block_s, DX=DX, DY=DY)
        return means, P_out, loglik
