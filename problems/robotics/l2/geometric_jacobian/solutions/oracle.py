"""Oracle for robotics/l2/geometric_jacobian: forward kinematics and Jacobian in one Triton kernel.

One lane per sample keeps the running frame (R, p) in registers. The first sweep writes
each column's angular row z_j and its partial linear row -(z_j x o_j); once the end
effector p_E is known, the second sweep adds z_j x p_E (linearity of the cross product),
so no per-joint frames are stored.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _jacobian_kernel(q_ptr, tab, jac_ptr, te_ptr, B, J, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < B
    one = tl.full([BLOCK], 1.0, tl.float32)
    zero = tl.zeros([BLOCK], tl.float32)
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = one, zero, zero, zero, one, zero, zero, zero, one
    p0, p1, p2 = zero, zero, zero
    jac = jac_ptr + rows * (6 * J)
    for j in range(J):
        t = tab + j * 15                      # R_f (9), p_f (3), axis (3)
        f0, f1, f2 = tl.load(t + 9), tl.load(t + 10), tl.load(t + 11)
        p0 += r00 * f0 + r01 * f1 + r02 * f2
        p1 += r10 * f0 + r11 * f1 + r12 * f2
        p2 += r20 * f0 + r21 * f1 + r22 * f2
        # M = R R_f
        a00, a01, a02 = tl.load(t + 0), tl.load(t + 1), tl.load(t + 2)
        a10, a11, a12 = tl.load(t + 3), tl.load(t + 4), tl.load(t + 5)
        a20, a21, a22 = tl.load(t + 6), tl.load(t + 7), tl.load(t + 8)
        m00, m01, m02 = r00 * a00 + r01 * a10 + r02 * a20, r00 * a01 + r01 * a11 + r02 * a21, r00 * a02 + r01 * a12 + r02 * a22
        m10, m11, m12 = r10 * a00 + r11 * a10 + r12 * a20, r10 * a01 + r11 * a11 + r12 * a21, r10 * a02 + r11 * a12 + r12 * a22
        m20, m21, m22 = r20 * a00 + r21 * a10 + r22 * a20, r20 * a01 + r21 * a11 + r22 * a21, r20 * a02 + r21 * a12 + r22 * a22
        # Rot(s, q) = cos I + (1 - cos) s s^T + sin [s]x
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
        # z = R s (Rot(s, q) s = s, so M s would do too)
        z0 = m00 * s0 + m01 * s1 + m02 * s2
        z1 = m10 * s0 + m11 * s1 + m12 * s2
        z2 = m20 * s0 + m21 * s1 + m22 * s2
        # rows 0-2: -(z x o) for now; rows 3-5: z
        tl.store(jac + 0 * J + j, z2 * p1 - z1 * p2, mask=mask)
        tl.store(jac + 1 * J + j, z0 * p2 - z2 * p0, mask=mask)
        tl.store(jac + 2 * J + j, z1 * p0 - z0 * p1, mask=mask)
        tl.store(jac + 3 * J + j, z0, mask=mask)
        tl.store(jac + 4 * J + j, z1, mask=mask)
        tl.store(jac + 5 * J + j, z2, mask=mask)
    # end effector: T_E = T_J T_ee
    e = tab + J * 15                          # T_ee rotation (9), offset (3)
    b00, b01, b02 = tl.load(e + 0), tl.load(e + 1), tl.load(e + 2)
    b10, b11, b12 = tl.load(e + 3), tl.load(e + 4), tl.load(e + 5)
    b20, b21, b22 = tl.load(e + 6), tl.load(e + 7), tl.load(e + 8)
    t0, t1, t2 = tl.load(e + 9), tl.load(e + 10), tl.load(e + 11)
    pe0 = p0 + r00 * t0 + r01 * t1 + r02 * t2
    pe1 = p1 + r10 * t0 + r11 * t1 + r12 * t2
    pe2 = p2 + r20 * t0 + r21 * t1 + r22 * t2
    te = te_ptr + rows * 16
    tl.store(te + 0, r00 * b00 + r01 * b10 + r02 * b20, mask=mask)
    tl.store(te + 1, r00 * b01 + r01 * b11 + r02 * b21, mask=mask)
    tl.store(te + 2, r00 * b02 + r01 * b12 + r02 * b22, mask=mask)
    tl.store(te + 3, pe0, mask=mask)
    tl.store(te + 4, r10 * b00 + r11 * b10 + r12 * b20, mask=mask)
    tl.store(te + 5, r10 * b01 + r11 * b11 + r12 * b21, mask=mask)
    tl.store(te + 6, r10 * b02 + r11 * b12 + r12 * b22, mask=mask)
    tl.store(te + 7, pe1, mask=mask)
    tl.store(te + 8, r20 * b00 + r21 * b10 + r22 * b20, mask=mask)
    tl.store(te + 9, r20 * b01 + r21 * b11 + r22 * b21, mask=mask)
    tl.store(te + 10, r20 * b02 + r21 * b12 + r22 * b22, mask=mask)
    tl.store(te + 11, pe2, mask=mask)
    tl.store(te + 12, zero, mask=mask)
    tl.store(te + 13, zero, mask=mask)
    tl.store(te + 14, zero, mask=mask)
    tl.store(te + 15, one, mask=mask)
    # second sweep: linear rows += z x p_E
    for j in range(J):
        z0 = tl.load(jac + 3 * J + j, mask=mask, other=0.0)
        z1 = tl.load(jac + 4 * J + j, mask=mask, other=0.0)
        z2 = tl.load(jac + 5 * J + j, mask=mask, other=0.0)
        l0 = tl.load(jac + 0 * J + j, mask=mask, other=0.0)
        l1 = tl.load(jac + 1 * J + j, mask=mask, other=0.0)
        l2 = tl.load(jac + 2 * J + j, mask=mask, other=0.0)
        tl.store(jac + 0 * J + j, l0 + z1 * pe2 - z2 * pe1, mask=mask)
        tl.store(jac + 1 * J + j, l1 + z2 * pe0 - z0 * pe2, mask=mask)
        tl.store(jac + 2 * J + j, l2 + z0 * pe1 - z1 * pe0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, R_f, p_f, axis, T_ee):
        super().__init__()
        n = R_f.shape[0]
        table = torch.cat([torch.cat([R_f.reshape(n, 9), p_f, axis], 1).reshape(-1),
                           T_ee[:3, :3].reshape(-1), T_ee[:3, 3]])
        self.register_buffer("table", table.float().contiguous())

    def forward(self, q):
        B, J = q.shape
        q = q.float().contiguous()
        jac = torch.empty(B, 6, J, device=q.device, dtype=torch.float32)
        T_E = torch.empty(B, 4, 4, device=q.device, dtype=torch.float32)
        BLOCK = 128 if q.is_cuda else 1024
        if B:
            _jacobian_kernel[(triton.cdiv(B, BLOCK),)](q, self.table.to(q.device), jac, T_E, B, J, BLOCK=BLOCK)
        return jac, T_E
