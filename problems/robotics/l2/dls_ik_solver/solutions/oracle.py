"""Oracle for robotics/l2/dls_ik_solver: the whole damped-least-squares solver in one Triton kernel.

One lane per IK problem runs all K iterations: a forward-kinematics sweep keeps the running
frame in registers and leaves each joint's world axis and origin in a scratch buffer
([J, 6, B], coalesced); J J^T + lambda^2 I (21 unique entries) is accumulated column by column, factored by an
unrolled 6x6 Cholesky, solved by forward and back substitution, and the step J^T y is applied
and clamped joint by joint. The SO(3) log uses an fp32 atan2 (Cephes atanf polynomial).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

DAMPING = 0.05
SMALL_ANGLE = tl.constexpr(1e-3)
NEAR_PI = tl.constexpr(3.141592653589793 - 0.05)


@triton.jit
def _atan_unit(a):
    """atan(a) for a in [0, 1] (Cephes atanf: reduction at tan(pi/8), degree-9 odd polynomial)."""
    big = a > 0.41421356237309503
    x = tl.where(big, (a - 1.0) / (a + 1.0), a)
    z = x * x
    y = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * x + x
    return tl.where(big, 0.7853981633974483 + y, y)


@triton.jit
def _atan2_upper(s, c):
    """atan2(s, c) for s >= 0, in [0, pi]."""
    ac = tl.abs(c)
    hi = tl.maximum(s, ac)
    lo = tl.minimum(s, ac)
    t = _atan_unit(lo / tl.where(hi > 0, hi, 1.0))
    t = tl.where(s > ac, 1.5707963267948966 - t, t)
    return tl.where(c < 0, 3.141592653589793 - t, t)


@triton.jit
def _so3_log(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    w0 = m21 - m12
    w1 = m02 - m20
    w2 = m10 - m01
    sn = tl.sqrt(w0 * w0 + w1 * w1 + w2 * w2) * 0.5
    cs = (m00 + m11 + m22 - 1.0) * 0.5
    th = _atan2_upper(sn, cs)
    factor = tl.where(th < SMALL_ANGLE, 0.5 + th * th / 12.0, th / (2.0 * tl.maximum(sn, 1e-30)))
    # near pi: the axis is the column of the largest diagonal of ((R + R^T)/2 - cos I) / (1 - cos)
    d = 1.0 / tl.maximum(1.0 - cs, 1.0)
    s00 = (m00 - cs) * d
    s11 = (m11 - cs) * d
    s22 = (m22 - cs) * d
    s01 = (m01 + m10) * 0.5 * d
    s02 = (m02 + m20) * 0.5 * d
    s12 = (m12 + m21) * 0.5 * d
    k0 = (s00 >= s11) & (s00 >= s22)
    k1 = (~k0) & (s11 >= s22)
    a0 = tl.where(k0, s00, tl.where(k1, s01, s02))
    a1 = tl.where(k0, s01, tl.where(k1, s11, s12))
    a2 = tl.where(k0, s02, tl.where(k1, s12, s22))
    inv = 1.0 / tl.maximum(tl.sqrt(a0 * a0 + a1 * a1 + a2 * a2), 1e-30)
    sign = tl.where(a0 * w0 + a1 * w1 + a2 * w2 < 0, -inv, inv)
    near = th > NEAR_PI
    return (tl.where(near, th * a0 * sign, factor * w0),
            tl.where(near, th * a1 * sign, factor * w1),
            tl.where(near, th * a2 * sign, factor * w2))


@triton.jit
def _forward_kinematics(q_ptr, tab, scratch, rows, mask, B, J, BLOCK: tl.constexpr):
    """End-effector pose; leaves each joint's world axis z_j and origin o_j in scratch
    (layout [J, 6, B], so consecutive lanes touch consecutive words)."""
    one = tl.full([BLOCK], 1.0, tl.float32)
    zero = tl.zeros([BLOCK], tl.float32)
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = one, zero, zero, zero, one, zero, zero, zero, one
    p0, p1, p2 = zero, zero, zero
    for j in range(J):
        t = tab + j * 15                      # R_f (9), p_f (3), axis (3)
        f0, f1, f2 = tl.load(t + 9), tl.load(t + 10), tl.load(t + 11)
        p0 += r00 * f0 + r01 * f1 + r02 * f2
        p1 += r10 * f0 + r11 * f1 + r12 * f2
        p2 += r20 * f0 + r21 * f1 + r22 * f2
        a00, a01, a02 = tl.load(t + 0), tl.load(t + 1), tl.load(t + 2)
        a10, a11, a12 = tl.load(t + 3), tl.load(t + 4), tl.load(t + 5)
        a20, a21, a22 = tl.load(t + 6), tl.load(t + 7), tl.load(t + 8)
        m00, m01, m02 = r00 * a00 + r01 * a10 + r02 * a20, r00 * a01 + r01 * a11 + r02 * a21, r00 * a02 + r01 * a12 + r02 * a22
        m10, m11, m12 = r10 * a00 + r11 * a10 + r12 * a20, r10 * a01 + r11 * a11 + r12 * a21, r10 * a02 + r11 * a12 + r12 * a22
        m20, m21, m22 = r20 * a00 + r21 * a10 + r22 * a20, r20 * a01 + r21 * a11 + r22 * a21, r20 * a02 + r21 * a12 + r22 * a22
        s0, s1, s2 = tl.load(t + 12), tl.load(t + 13), tl.load(t + 14)
        qj = tl.load(q_ptr + rows * J + j, mask=mask, other=0.0)
        sn, cs = tl.sin(qj), tl.cos(qj)
        k = 1.0 - cs
        k00, k01, k02 = cs + k * s0 * s0, k * s0 * s1 - sn * s2, k * s0 * s2 + sn * s1
        k10, k11, k12 = k * s1 * s0 + sn * s2, cs + k * s1 * s1, k * s1 * s2 - sn * s0
        k20, k21, k22 = k * s2 * s0 - sn * s1, k * s2 * s1 + sn * s0, cs + k * s2 * s2
        r00, r01, r02 = m00 * k00 + m01 * k10 + m02 * k20, m00 * k01 + m01 * k11 + m02 * k21, m00 * k02 + m01 * k12 + m02 * k22
        r10, r11, r12 = m10 * k00 + m11 * k10 + m12 * k20, m10 * k01 + m11 * k11 + m12 * k21, m10 * k02 + m11 * k12 + m12 * k22
        r20, r21, r22 = m20 * k00 + m21 * k10 + m22 * k20, m20 * k01 + m21 * k11 + m22 * k21, m20 * k02 + m21 * k12 + m22 * k22
        sc = scratch + j * 6 * B + rows
        tl.store(sc, m00 * s0 + m01 * s1 + m02 * s2, mask=mask)    # z_j = R_j a_j
        tl.store(sc + 1 * B, m10 * s0 + m11 * s1 + m12 * s2, mask=mask)
        tl.store(sc + 2 * B, m20 * s0 + m21 * s1 + m22 * s2, mask=mask)
        tl.store(sc + 3 * B, p0, mask=mask)                                 # o_j
        tl.store(sc + 4 * B, p1, mask=mask)
        tl.store(sc + 5 * B, p2, mask=mask)
    e = tab + J * 15                          # T_ee rotation (9), offset (3)
    b00, b01, b02 = tl.load(e + 0), tl.load(e + 1), tl.load(e + 2)
    b10, b11, b12 = tl.load(e + 3), tl.load(e + 4), tl.load(e + 5)
    b20, b21, b22 = tl.load(e + 6), tl.load(e + 7), tl.load(e + 8)
    t0, t1, t2 = tl.load(e + 9), tl.load(e + 10), tl.load(e + 11)
    return (p0 + r00 * t0 + r01 * t1 + r02 * t2,
            p1 + r10 * t0 + r11 * t1 + r12 * t2,
            p2 + r20 * t0 + r21 * t1 + r22 * t2,
            r00 * b00 + r01 * b10 + r02 * b20, r00 * b01 + r01 * b11 + r02 * b21, r00 * b02 + r01 * b12 + r02 * b22,
            r10 * b00 + r11 * b10 + r12 * b20, r10 * b01 + r11 * b11 + r12 * b21, r10 * b02 + r11 * b12 + r12 * b22,
            r20 * b00 + r21 * b10 + r22 * b20, r20 * b01 + r21 * b11 + r22 * b21, r20 * b02 + r21 * b12 + r22 * b22)


@triton.jit
def _pose_error(tgt, mask, pe0, pe1, pe2, e00, e01, e02, e10, e11, e12, e20, e21, e22):
    """[p_t - p_E; Log(R_t R_E^T)] for the target rows at tgt (row-major 4x4)."""
    t00, t01, t02 = tl.load(tgt + 0, mask=mask, other=1.0), tl.load(tgt + 1, mask=mask, other=0.0), tl.load(tgt + 2, mask=mask, other=0.0)
    t10, t11, t12 = tl.load(tgt + 4, mask=mask, other=0.0), tl.load(tgt + 5, mask=mask, other=1.0), tl.load(tgt + 6, mask=mask, other=0.0)
    t20, t21, t22 = tl.load(tgt + 8, mask=mask, other=0.0), tl.load(tgt + 9, mask=mask, other=0.0), tl.load(tgt + 10, mask=mask, other=1.0)
    x0 = tl.load(tgt + 3, mask=mask, other=0.0) - pe0
    x1 = tl.load(tgt + 7, mask=mask, other=0.0) - pe1
    x2 = tl.load(tgt + 11, mask=mask, other=0.0) - pe2
    w0, w1, w2 = _so3_log(
        t00 * e00 + t01 * e01 + t02 * e02, t00 * e10 + t01 * e11 + t02 * e12, t00 * e20 + t01 * e21 + t02 * e22,
        t10 * e00 + t11 * e01 + t12 * e02, t10 * e10 + t11 * e11 + t12 * e12, t10 * e20 + t11 * e21 + t12 * e22,
        t20 * e00 + t21 * e01 + t22 * e02, t20 * e10 + t21 * e11 + t22 * e12, t20 * e20 + t21 * e21 + t22 * e22)
    return x0, x1, x2, w0, w1, w2


@triton.jit
def _dls_kernel(q_ptr, tgt_ptr, lim_ptr, tab, scratch, err_ptr, B, J, iters, damp, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < B
    tgt = tgt_ptr + rows * 16
    zero = tl.zeros([BLOCK], tl.float32)
    for it in range(iters):
        pe0, pe1, pe2, e00, e01, e02, e10, e11, e12, e20, e21, e22 = _forward_kinematics(
            q_ptr, tab, scratch, rows, mask, B, J, BLOCK)
        e0, e1, e2, e3, e4, e5 = _pose_error(tgt, mask, pe0, pe1, pe2, e00, e01, e02, e10, e11, e12, e20, e21, e22)
        a00 = zero + damp
        a10 = zero
        a11 = zero + damp
        a20 = zero
        a21 = zero
        a22 = zero + damp
        a30 = zero
        a31 = zero
        a32 = zero
        a33 = zero + damp
        a40 = zero
        a41 = zero
        a42 = zero
        a43 = zero
        a44 = zero + damp
        a50 = zero
        a51 = zero
        a52 = zero
        a53 = zero
        a54 = zero
        a55 = zero + damp
        for j in range(J):                    # A = J J^T + lambda^2 I, lower triangle
            sc = scratch + j * 6 * B + rows
            z0, z1, z2 = tl.load(sc, mask=mask, other=0.0), tl.load(sc + 1 * B, mask=mask, other=0.0), tl.load(sc + 2 * B, mask=mask, other=0.0)
            d0 = pe0 - tl.load(sc + 3 * B, mask=mask, other=0.0)
            d1 = pe1 - tl.load(sc + 4 * B, mask=mask, other=0.0)
            d2 = pe2 - tl.load(sc + 5 * B, mask=mask, other=0.0)
            c0, c1, c2, c3, c4, c5 = z1 * d2 - z2 * d1, z2 * d0 - z0 * d2, z0 * d1 - z1 * d0, z0, z1, z2
            a00 += c0 * c0
            a10 += c1 * c0
            a11 += c1 * c1
            a20 += c2 * c0
            a21 += c2 * c1
            a22 += c2 * c2
            a30 += c3 * c0
            a31 += c3 * c1
            a32 += c3 * c2
            a33 += c3 * c3
            a40 += c4 * c0
            a41 += c4 * c1
            a42 += c4 * c2
            a43 += c4 * c3
            a44 += c4 * c4
            a50 += c5 * c0
            a51 += c5 * c1
            a52 += c5 * c2
            a53 += c5 * c3
            a54 += c5 * c4
            a55 += c5 * c5
        l00 = tl.sqrt(a00)
        inv0 = 1.0 / l00
        l10 = (a10) * inv0
        l20 = (a20) * inv0
        l30 = (a30) * inv0
        l40 = (a40) * inv0
        l50 = (a50) * inv0
        l11 = tl.sqrt(a11 - l10 * l10)
        inv1 = 1.0 / l11
        l21 = (a21 - l20 * l10) * inv1
        l31 = (a31 - l30 * l10) * inv1
        l41 = (a41 - l40 * l10) * inv1
        l51 = (a51 - l50 * l10) * inv1
        l22 = tl.sqrt(a22 - l20 * l20 - l21 * l21)
        inv2 = 1.0 / l22
        l32 = (a32 - l30 * l20 - l31 * l21) * inv2
        l42 = (a42 - l40 * l20 - l41 * l21) * inv2
        l52 = (a52 - l50 * l20 - l51 * l21) * inv2
        l33 = tl.sqrt(a33 - l30 * l30 - l31 * l31 - l32 * l32)
        inv3 = 1.0 / l33
        l43 = (a43 - l40 * l30 - l41 * l31 - l42 * l32) * inv3
        l53 = (a53 - l50 * l30 - l51 * l31 - l52 * l32) * inv3
        l44 = tl.sqrt(a44 - l40 * l40 - l41 * l41 - l42 * l42 - l43 * l43)
        inv4 = 1.0 / l44
        l54 = (a54 - l50 * l40 - l51 * l41 - l52 * l42 - l53 * l43) * inv4
        l55 = tl.sqrt(a55 - l50 * l50 - l51 * l51 - l52 * l52 - l53 * l53 - l54 * l54)
        inv5 = 1.0 / l55
        w0 = (e0) * inv0
        w1 = (e1 - l10 * w0) * inv1
        w2 = (e2 - l20 * w0 - l21 * w1) * inv2
        w3 = (e3 - l30 * w0 - l31 * w1 - l32 * w2) * inv3
        w4 = (e4 - l40 * w0 - l41 * w1 - l42 * w2 - l43 * w3) * inv4
        w5 = (e5 - l50 * w0 - l51 * w1 - l52 * w2 - l53 * w3 - l54 * w4) * inv5
        y5 = (w5) * inv5
        y4 = (w4 - l54 * y5) * inv4
        y3 = (w3 - l43 * y4 - l53 * y5) * inv3
        y2 = (w2 - l32 * y3 - l42 * y4 - l52 * y5) * inv2
        y1 = (w1 - l21 * y2 - l31 * y3 - l41 * y4 - l51 * y5) * inv1
        y0 = (w0 - l10 * y1 - l20 * y2 - l30 * y3 - l40 * y4 - l50 * y5) * inv0
        for j in range(J):                    # q_j = clamp(q_j + column_j . y)
            sc = scratch + j * 6 * B + rows
            z0, z1, z2 = tl.load(sc, mask=mask, other=0.0), tl.load(sc + 1 * B, mask=mask, other=0.0), tl.load(sc + 2 * B, mask=mask, other=0.0)
            d0 = pe0 - tl.load(sc + 3 * B, mask=mask, other=0.0)
            d1 = pe1 - tl.load(sc + 4 * B, mask=mask, other=0.0)
            d2 = pe2 - tl.load(sc + 5 * B, mask=mask, other=0.0)
            dq = (z1 * d2 - z2 * d1) * y0 + (z2 * d0 - z0 * d2) * y1 + (z0 * d1 - z1 * d0) * y2 + z0 * y3 + z1 * y4 + z2 * y5
            qj = tl.load(q_ptr + rows * J + j, mask=mask, other=0.0) + dq
            qj = tl.minimum(tl.maximum(qj, tl.load(lim_ptr + 2 * j)), tl.load(lim_ptr + 2 * j + 1))
            tl.store(q_ptr + rows * J + j, qj, mask=mask)
    pe0, pe1, pe2, e00, e01, e02, e10, e11, e12, e20, e21, e22 = _forward_kinematics(
        q_ptr, tab, scratch, rows, mask, B, J, BLOCK)
    e0, e1, e2, e3, e4, e5 = _pose_error(tgt, mask, pe0, pe1, pe2, e00, e01, e02, e10, e11, e12, e20, e21, e22)
    tl.store(err_ptr + rows, tl.sqrt(e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3 + e4 * e4 + e5 * e5), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, R_f, p_f, axis, T_ee, iters: int):
        super().__init__()
        n = R_f.shape[0]
        table = torch.cat([torch.cat([R_f.reshape(n, 9), p_f, axis], 1).reshape(-1),
                           T_ee[:3, :3].reshape(-1), T_ee[:3, 3]])
        self.register_buffer("table", table.float().contiguous())
        self.iters = iters

    def forward(self, q0, targets, limits):
        B, J = q0.shape
        q = q0.float().contiguous().clone()
        err = torch.empty(B, device=q0.device, dtype=torch.float32)
        scratch = torch.empty(J, 6, B, device=q0.device, dtype=torch.float32)
        BLOCK = 64 if q0.is_cuda else 1024
        if B:
            _dls_kernel[(triton.cdiv(B, BLOCK),)](
                q, targets.float().contiguous(), limits.float().contiguous(), self.table.to(q0.device), scratch, err,
                B, J, self.iters, DAMPING * DAMPING, BLOCK=BLOCK)
        return q, err
