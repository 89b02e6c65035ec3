"""Oracle for robotics/l2/rnea_inverse_dynamics: both RNEA passes in one Triton kernel.

One lane per sample; the running velocity and acceleration stay in registers, a joint
transform is (E, r), and the forward pass leaves E_i and f_i in a per-block scratch buffer
([blocks, J, 15, BLOCK], coalesced) for the backward pass, which carries the child force.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@triton.jit
def _mv(m00, m01, m02, m10, m11, m12, m20, m21, m22, x0, x1, x2):
    return (m00 * x0 + m01 * x1 + m02 * x2,
            m10 * x0 + m11 * x1 + m12 * x2,
            m20 * x0 + m21 * x1 + m22 * x2)


@triton.jit
def _mtv(m00, m01, m02, m10, m11, m12, m20, m21, m22, x0, x1, x2):
    return (m00 * x0 + m10 * x1 + m20 * x2,
            m01 * x0 + m11 * x1 + m21 * x2,
            m02 * x0 + m12 * x1 + m22 * x2)


@triton.jit
def _mm(a00, a01, a02, a10, a11, a12, a20, a21, a22,
        b00, b01, b02, b10, b11, b12, b20, b21, b22):
    return (a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21, a00 * b02 + a01 * b12 + a02 * b22,
            a10 * b00 + a11 * b10 + a12 * b20, a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22,
            a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21, a20 * b02 + a21 * b12 + a22 * b22)


@triton.jit
def _mtm(a00, a01, a02, a10, a11, a12, a20, a21, a22,
         b00, b01, b02, b10, b11, b12, b20, b21, b22):
    """a^T b"""
    return (a00 * b00 + a10 * b10 + a20 * b20, a00 * b01 + a10 * b11 + a20 * b21, a00 * b02 + a10 * b12 + a20 * b22,
            a01 * b00 + a11 * b10 + a21 * b20, a01 * b01 + a11 * b11 + a21 * b21, a01 * b02 + a11 * b12 + a21 * b22,
            a02 * b00 + a12 * b10 + a22 * b20, a02 * b01 + a12 * b11 + a22 * b21, a02 * b02 + a12 * b12 + a22 * b22)


@triton.jit
def _rnea_kernel(q_ptr, qd_ptr, qdd_ptr, tau_ptr, tab, scr, grav, B, J, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < B
    scr = scr + tl.program_id(0) * (J * 15 * BLOCK) + tl.arange(0, BLOCK)
    zero = tl.zeros([BLOCK], tl.float32)
    w0, w1, w2, l0, l1, l2 = zero, zero, zero, zero, zero, zero
    aw0, aw1, aw2 = zero, zero, zero
    al0, al1, al2 = zero - tl.load(grav), zero - tl.load(grav + 1), zero - tl.load(grav + 2)
    for j in range(J):
        t = tab + j * 34
        o = scr + j * (15 * BLOCK)
        s0, s1, s2 = tl.load(t + 12), tl.load(t + 13), tl.load(t + 14)
        r0, r1, r2 = tl.load(t + 9), tl.load(t + 10), tl.load(t + 11)
        qj = tl.load(q_ptr + rows * J + j, mask=mask, other=0.0)
        qdj = tl.load(qd_ptr + rows * J + j, mask=mask, other=0.0)
        qddj = tl.load(qdd_ptr + rows * J + j, mask=mask, other=0.0)
        sn, cs = tl.sin(qj), tl.cos(qj)
        k = 1.0 - cs
        R00, R01, R02 = cs + k * s0 * s0, k * s0 * s1 - sn * s2, k * s0 * s2 + sn * s1
        R10, R11, R12 = k * s1 * s0 + sn * s2, cs + k * s1 * s1, k * s1 * s2 - sn * s0
        R20, R21, R22 = k * s2 * s0 - sn * s1, k * s2 * s1 + sn * s0, cs + k * s2 * s2
        e00, e01, e02, e10, e11, e12, e20, e21, e22 = _mtm(
            R00, R01, R02, R10, R11, R12, R20, R21, R22,
            tl.load(t + 0), tl.load(t + 1), tl.load(t + 2), tl.load(t + 3), tl.load(t + 4),
            tl.load(t + 5), tl.load(t + 6), tl.load(t + 7), tl.load(t + 8))
        # v = X v_parent + S qd ; a = X a_parent + S qdd + crm(v) S qd
        x0, x1, x2 = _cross(r0, r1, r2, w0, w1, w2)
        l0, l1, l2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, l0 - x0, l1 - x1, l2 - x2)
        w0, w1, w2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, w0, w1, w2)
        w0, w1, w2 = w0 + s0 * qdj, w1 + s1 * qdj, w2 + s2 * qdj
        x0, x1, x2 = _cross(r0, r1, r2, aw0, aw1, aw2)
        al0, al1, al2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, al0 - x0, al1 - x1, al2 - x2)
        aw0, aw1, aw2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, aw0, aw1, aw2)
        cw0, cw1, cw2 = _cross(w0, w1, w2, s0 * qdj, s1 * qdj, s2 * qdj)
        cl0, cl1, cl2 = _cross(l0, l1, l2, s0 * qdj, s1 * qdj, s2 * qdj)
        aw0, aw1, aw2 = aw0 + s0 * qddj + cw0, aw1 + s1 * qddj + cw1, aw2 + s2 * qddj + cw2
        al0, al1, al2 = al0 + cl0, al1 + cl1, al2 + cl2
        # f = I a + crf(v) I v with I = [[A, B], [B^T, m 1]]
        m = tl.load(t + 33)
        A00, A01, A02 = tl.load(t + 15), tl.load(t + 16), tl.load(t + 17)
        A10, A11, A12 = tl.load(t + 18), tl.load(t + 19), tl.load(t + 20)
        A20, A21, A22 = tl.load(t + 21), tl.load(t + 22), tl.load(t + 23)
        b00, b01, b02 = tl.load(t + 24), tl.load(t + 25), tl.load(t + 26)
        b10, b11, b12 = tl.load(t + 27), tl.load(t + 28), tl.load(t + 29)
        b20, b21, b22 = tl.load(t + 30), tl.load(t + 31), tl.load(t + 32)
        h0, h1, h2 = _mv(A00, A01, A02, A10, A11, A12, A20, A21, A22, w0, w1, w2)
        y0, y1, y2 = _mv(b00, b01, b02, b10, b11, b12, b20, b21, b22, l0, l1, l2)
        h0, h1, h2 = h0 + y0, h1 + y1, h2 + y2
        g0, g1, g2 = _mtv(b00, b01, b02, b10, b11, b12, b20, b21, b22, w0, w1, w2)
        g0, g1, g2 = g0 + m * l0, g1 + m * l1, g2 + m * l2
        n0, n1, n2 = _mv(A00, A01, A02, A10, A11, A12, A20, A21, A22, aw0, aw1, aw2)
        y0, y1, y2 = _mv(b00, b01, b02, b10, b11, b12, b20, b21, b22, al0, al1, al2)
        n0, n1, n2 = n0 + y0, n1 + y1, n2 + y2
        F0, F1, F2 = _mtv(b00, b01, b02, b10, b11, b12, b20, b21, b22, aw0, aw1, aw2)
        F0, F1, F2 = F0 + m * al0, F1 + m * al1, F2 + m * al2
        x0, x1, x2 = _cross(w0, w1, w2, h0, h1, h2)
        y0, y1, y2 = _cross(l0, l1, l2, g0, g1, g2)
        n0, n1, n2 = n0 + x0 + y0, n1 + x1 + y1, n2 + x2 + y2
        x0, x1, x2 = _cross(w0, w1, w2, g0, g1, g2)
        F0, F1, F2 = F0 + x0, F1 + x1, F2 + x2
        tl.store(o + 0 * BLOCK, e00)
        tl.store(o + 1 * BLOCK, e01)
        tl.store(o + 2 * BLOCK, e02)
        tl.store(o + 3 * BLOCK, e10)
        tl.store(o + 4 * BLOCK, e11)
        tl.store(o + 5 * BLOCK, e12)
        tl.store(o + 6 * BLOCK, e20)
        tl.store(o + 7 * BLOCK, e21)
        tl.store(o + 8 * BLOCK, e22)
        tl.store(o + 9 * BLOCK, n0)
        tl.store(o + 10 * BLOCK, n1)
        tl.store(o + 11 * BLOCK, n2)
        tl.store(o + 12 * BLOCK, F0)
        tl.store(o + 13 * BLOCK, F1)
        tl.store(o + 14 * BLOCK, F2)
    # backward pass: f_i += X_{i+1}^T f_{i+1}; tau_i = S_i^T f_i
    cn0, cn1, cn2, cf0, cf1, cf2 = zero, zero, zero, zero, zero, zero
    for jj in range(J):
        j = J - 1 - jj
        t = tab + j * 34
        o = scr + j * (15 * BLOCK)
        cn0 += tl.load(o + 9 * BLOCK)
        cn1 += tl.load(o + 10 * BLOCK)
        cn2 += tl.load(o + 11 * BLOCK)
        cf0 += tl.load(o + 12 * BLOCK)
        cf1 += tl.load(o + 13 * BLOCK)
        cf2 += tl.load(o + 14 * BLOCK)
        s0, s1, s2 = tl.load(t + 12), tl.load(t + 13), tl.load(t + 14)
        tl.store(tau_ptr + rows * J + j, s0 * cn0 + s1 * cn1 + s2 * cn2, mask=mask)
        e00, e01, e02 = tl.load(o + 0 * BLOCK), tl.load(o + 1 * BLOCK), tl.load(o + 2 * BLOCK)
        e10, e11, e12 = tl.load(o + 3 * BLOCK), tl.load(o + 4 * BLOCK), tl.load(o + 5 * BLOCK)
        e20, e21, e22 = tl.load(o + 6 * BLOCK), tl.load(o + 7 * BLOCK), tl.load(o + 8 * BLOCK)
        r0, r1, r2 = tl.load(t + 9), tl.load(t + 10), tl.load(t + 11)
        cf0, cf1, cf2 = _mtv(e00, e01, e02, e10, e11, e12, e20, e21, e22, cf0, cf1, cf2)
        cn0, cn1, cn2 = _mtv(e00, e01, e02, e10, e11, e12, e20, e21, e22, cn0, cn1, cn2)
        x0, x1, x2 = _cross(r0, r1, r2, cf0, cf1, cf2)
        cn0, cn1, cn2 = cn0 + x0, cn1 + x1, cn2 + x2


def chain_table(E_tree, r_tree, axis, mass, com, I_com) -> torch.Tensor:
    """[J, 34] float32: E_tree, r, axis, link inertia blocks A = I_com + m [c]x [c]x^T, B = m [c]x, mass."""
    c0, c1, c2 = com.unbind(-1)
    z = torch.zeros_like(c0)
    cx = torch.stack([z, -c2, c1, c2, z, -c0, -c1, c0, z], -1).view(-1, 3, 3)
    cxcxT = (cx[:, :, None, :] * cx[:, None, :, :]).sum(-1)  # [c]x [c]x^T without a matmul op
    m = mass[:, None, None]
    A = I_com + m * cxcxT
    Bm = m * cx
    n = mass.shape[0]
    return torch.cat([E_tree.reshape(n, 9), r_tree, axis, A.reshape(n, 9), Bm.reshape(n, 9), mass[:, None]],
                     -1).float().contiguous()


class ModelNew(nn.Module):
    def __init__(self, E_tree, r_tree, axis, mass, com, I_com, gravity):
        super().__init__()
        self.register_buffer("table", chain_table(E_tree, r_tree, axis, mass, com, I_com))
        self.register_buffer("gravity", gravity.float().contiguous())

    def forward(self, q, qd, qdd):
        B, J = q.shape
        q, qd, qdd = q.float().contiguous(), qd.float().contiguous(), qdd.float().contiguous()
        tau = torch.empty_like(q)
        BLOCK = 128 if q.is_cuda else 1024  # one sample per GPU lane; few interpreter programs on CPU
        scratch = torch.empty(triton.cdiv(B, BLOCK) * J * 15 * BLOCK, device=q.device, dtype=torch.float32)
        if B:
            _rnea_kernel[(triton.cdiv(B, BLOCK),)](q, qd, qdd, tau, self.table.to(q.device), scratch,
                                                   self.gravity.to(q.device), B, J, BLOCK=BLOCK)
        return tau
