"""Oracle for biology/l1/kabsch_rmsd: cross-covariance GEMMs with a QCP epilogue (no SVD).

Each program computes the nine cross terms of a [BM x BN] block of conformer pairs with
fp32 tensor-core-free (IEEE) dots over the atoms, then finds the largest eigenvalue of
Theobald's 4x4 key matrix by Newton's method on its characteristic polynomial in float64
(Theobald 2005; Liu, Agrafiotis & Theobald 2010), and writes only the RMSD.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cross(xa, xb, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf):
    ta = tl.load(xa + a_rows[:, None] * n_atoms + k[None, :], mask=a_ok[:, None] & (k[None, :] < n_atoms), other=0.0)
    tb = tl.load(xb + b_rows[None, :] * n_atoms + k[:, None], mask=b_ok[None, :] & (k[:, None] < n_atoms), other=0.0)
    return tl.dot(ta, tb, input_precision="ieee")


@triton.jit
def _rmsd_qcp(x, sq, out, n_conf, n_atoms, NEWTON: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a_rows = tl.program_id(0) * BM + tl.arange(0, BM)
    b_rows = tl.program_id(1) * BN + tl.arange(0, BN)
    a_ok = a_rows < n_conf
    b_ok = b_rows < n_conf
    plane = n_conf * n_atoms  # x is [3, M, N]: one plane per coordinate
    sxx = tl.zeros([BM, BN], dtype=tl.float32)
    sxy = tl.zeros([BM, BN], dtype=tl.float32)
    sxz = tl.zeros([BM, BN], dtype=tl.float32)
    syx = tl.zeros([BM, BN], dtype=tl.float32)
    syy = tl.zeros([BM, BN], dtype=tl.float32)
    syz = tl.zeros([BM, BN], dtype=tl.float32)
    szx = tl.zeros([BM, BN], dtype=tl.float32)
    szy = tl.zeros([BM, BN], dtype=tl.float32)
    szz = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, n_atoms, BK):
        k = k0 + tl.arange(0, BK)
        sxx += _cross(x, x, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        sxy += _cross(x, x + plane, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        sxz += _cross(x, x + 2 * plane, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        syx += _cross(x + plane, x, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        syy += _cross(x + plane, x + plane, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        syz += _cross(x + plane, x + 2 * plane, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        szx += _cross(x + 2 * plane, x, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        szy += _cross(x + 2 * plane, x + plane, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
        szz += _cross(x + 2 * plane, x + 2 * plane, a_rows, b_rows, k, n_atoms, a_ok, b_ok, n_conf)
    # QCP in float64
    Sxx = sxx.to(tl.float64)
    Sxy = sxy.to(tl.float64)
    Sxz = sxz.to(tl.float64)
    Syx = syx.to(tl.float64)
    Syy = syy.to(tl.float64)
    Syz = syz.to(tl.float64)
    Szx = szx.to(tl.float64)
    Szy = szy.to(tl.float64)
    Szz = szz.to(tl.float64)
    Sxx2, Syy2, Szz2 = Sxx * Sxx, Syy * Syy, Szz * Szz
    Sxy2, Syz2, Sxz2 = Sxy * Sxy, Syz * Syz, Sxz * Sxz
    Syx2, Szy2, Szx2 = Syx * Syx, Szy * Szy, Szx * Szx
    SyzSzymSyySzz2 = 2.0 * (Syz * Szy - Syy * Szz)
    Sxx2Syy2Szz2Syz2Szy2 = Syy2 + Szz2 - Sxx2 + Syz2 + Szy2
    c2 = -2.0 * (Sxx2 + Syy2 + Szz2 + Sxy2 + Syx2 + Sxz2 + Szx2 + Syz2 + Szy2)
    c1 = 8.0 * (Sxx * Syz * Szy + Syy * Szx * Sxz + Szz * Sxy * Syx - Sxx * Syy * Szz - Syz * Szx * Sxy - Szy * Syx * Sxz)
    SxzpSzx, SyzpSzy, SxypSyx = Sxz + Szx, Syz + Szy, Sxy + Syx
    SyzmSzy, SxzmSzx, SxymSyx = Syz - Szy, Sxz - Szx, Sxy - Syx
    SxxpSyy, SxxmSyy = Sxx + Syy, Sxx - Syy
    Sxy2Sxz2Syx2Szx2 = Sxy2 + Sxz2 - Syx2 - Szx2
    c0 = (Sxy2Sxz2Syx2Szx2 * Sxy2Sxz2Syx2Szx2
          + (Sxx2Syy2Szz2Syz2Szy2 + SyzSzymSyySzz2) * (Sxx2Syy2Szz2Syz2Szy2 - SyzSzymSyySzz2)
          + (-SxzpSzx * SyzmSzy + SxymSyx * (SxxmSyy - Szz)) * (-SxzmSzx * SyzpSzy + SxymSyx * (SxxmSyy + Szz))
          + (-SxzpSzx * SyzpSzy - SxypSyx * (SxxpSyy - Szz)) * (-SxzmSzx * SyzmSzy - SxypSyx * (SxxpSyy + Szz))
          + (SxypSyx * SyzpSzy + SxzpSzx * (SxxmSyy + Szz)) * (-SxymSyx * SyzmSzy + SxzpSzx * (SxxpSyy + Szz))
          + (SxypSyx * SyzmSzy + SxzmSzx * (SxxmSyy - Szz)) * (-SxymSyx * SyzpSzy + SxzmSzx * (SxxpSyy - Szz)))
    ga = tl.load(sq + a_rows, mask=a_ok, other=0.0)
    gb = tl.load(sq + b_rows, mask=b_ok, other=0.0)
    e0 = (ga[:, None] + gb[None, :]) * 0.5
    lam = e0  # Newton from the upper bound (|Xa|^2 + |Xb|^2) / 2 converges to the largest root
    for _ in range(NEWTON):
        x2 = lam * lam
        bq = (x2 + c2) * lam
        aq = bq + c1
        den = 2.0 * x2 * lam + bq + aq
        step = (aq * lam + c0) / tl.where(den == 0.0, 1.0, den)
        lam = lam - tl.where(den == 0.0, 0.0, step)
    e = 2.0 * (e0 - lam) / n_atoms
    rmsd = tl.sqrt(tl.maximum(e, 0.0))
    tl.store(out + a_rows[:, None] * n_conf + b_rows[None, :], rmsd.to(tl.float32),
             mask=a_ok[:, None] & b_ok[None, :])


class ModelNew(nn.Module):
    def forward(self, coords):
        n_conf, n_atoms, _ = coords.shape
        centered = coords - coords.mean(1, keepdim=True)
        planes = centered.permute(2, 0, 1).contiguous()          # [3, M, N]
        sq = (centered.double() ** 2).sum((1, 2))
        out = torch.empty(n_conf, n_conf, dtype=coords.dtype, device=coords.device)
        bm = 64 if coords.is_cuda else 128
        _rmsd_qcp[(triton.cdiv(n_conf, bm), triton.cdiv(n_conf, bm))](
            planes, sq, out, n_conf, n_atoms, NEWTON=40, BM=bm, BN=bm, BK=32)
        return out
