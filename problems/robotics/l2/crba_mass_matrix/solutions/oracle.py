"""Oracle for robotics/l2/crba_mass_matrix: CRBA, bias torques and Cholesky in one Triton kernel.

One lane per sample. A forward sweep stores each joint's rotation E_i and its RNEA force
(at zero acceleration) in a per-block scratch buffer; the backward sweep carries both the
RNEA force and the composite inertia [[A, B], [B^T, C]] in registers, writes M_ii, walks
F = X^T F up the parents for the off-diagonal entries, and a final in-lane Cholesky turns M
into L.
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
def _mm(a00, a01, a02, a10, a11, a12, a20, a21, a22,
        b00, b01, b02, b10, b11, b12, b20, b21, b22):
    return (a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21, a00 * b02 + a01 * b12 + a02 * b22,
            a10 * b00 + a11 * b10 + a12 * b20, a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22,
            a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21, a20 * b02 + a21 * b12 + a22 * b22)


@triton.jit
def _congruence(e00, e01, e02, e10, e11, e12, e20, e21, e22,
                m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """E^T M E"""
    t00, t01, t02, t10, t11, t12, t20, t21, t22 = _mm(m00, m01, m02, m10, m11, m12, m20, m21, m22,
                                                      e00, e01, e02, e10, e11, e12, e20, e21, e22)
    return _mtm(e00, e01, e02, e10, e11, e12, e20, e21, e22, t00, t01, t02, t10, t11, t12, t20, t21, t22)


@triton.jit
def _crba_kernel(q_ptr, qd_ptr, M_ptr, C_ptr, L_ptr, tab, scr, grav, B, J, BLOCK: tl.constexpr):
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
        sn, cs = tl.sin(qj), tl.cos(qj)
        k = 1.0 - cs
        R00, R01, R02 = cs + k * s0 * s0, k * s0 * s1 - sn * s2, k * s0 * s2 + sn * s1
        R10, R11, R12 = k * s1 * s0 + sn * s2, cs + k * s1 * s1, k * s1 * s2 - sn * s0
        R20, R21, R22 = k * s2 * s0 - sn * s1, k * s2 * s1 + sn * s0, cs + k * s2 * s2
        e00, e01, e02, e10, e11, e12, e20, e21, e22 = _mtm(
            R00, R01, R02, R10, R11, R12, R20, R21, R22,
            tl.load(t + 0), tl.load(t + 1), tl.load(t + 2), tl.load(t + 3), tl.load(t + 4),
            tl.load(t + 5), tl.load(t + 6), tl.load(t + 7), tl.load(t + 8))
        # v = X v_parent + S qd ; a = X a_parent + crm(v) S qd (zero joint accelerations)
        x0, x1, x2 = _cross(r0, r1, r2, w0, w1, w2)
        l0, l1, l2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, l0 - x0, l1 - x1, l2 - x2)
        w0, w1, w2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, w0, w1, w2)
        w0, w1, w2 = w0 + s0 * qdj, w1 + s1 * qdj, w2 + s2 * qdj
        x0, x1, x2 = _cross(r0, r1, r2, aw0, aw1, aw2)
        al0, al1, al2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, al0 - x0, al1 - x1, al2 - x2)
        aw0, aw1, aw2 = _mv(e00, e01, e02, e10, e11, e12, e20, e21, e22, aw0, aw1, aw2)
        cw0, cw1, cw2 = _cross(w0, w1, w2, s0 * qdj, s1 * qdj, s2 * qdj)
        cl0, cl1, cl2 = _cross(l0, l1, l2, s0 * qdj, s1 * qdj, s2 * qdj)
        aw0, aw1, aw2 = aw0 + cw0, aw1 + cw1, aw2 + cw2
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
    # backward sweep: RNEA forces (-> C) and composite inertias (-> M)
    Mrow = M_ptr + rows * (J * J)
    cn0, cn1, cn2, cf0, cf1, cf2 = zero, zero, zero, zero, zero, zero
    A00, A01, A02, A10, A11, A12, A20, A21, A22 = zero, zero, zero, zero, zero, zero, zero, zero, zero
    B00, B01, B02, B10, B11, B12, B20, B21, B22 = zero, zero, zero, zero, zero, zero, zero, zero, zero
    C00, C01, C02, C10, C11, C12, C20, C21, C22 = zero, zero, zero, zero, zero, zero, zero, zero, zero
    for ii in range(J):
        i = J - 1 - ii
        t = tab + i * 34
        o = scr + i * (15 * BLOCK)
        s0, s1, s2 = tl.load(t + 12), tl.load(t + 13), tl.load(t + 14)
        cn0 += tl.load(o + 9 * BLOCK)
        cn1 += tl.load(o + 10 * BLOCK)
        cn2 += tl.load(o + 11 * BLOCK)
        cf0 += tl.load(o + 12 * BLOCK)
        cf1 += tl.load(o + 13 * BLOCK)
        cf2 += tl.load(o + 14 * BLOCK)
        tl.store(C_ptr + rows * J + i, s0 * cn0 + s1 * cn1 + s2 * cn2, mask=mask)
        m = tl.load(t + 33)
        A00 += tl.load(t + 15)
        A01 += tl.load(t + 16)
        A02 += tl.load(t + 17)
        A10 += tl.load(t + 18)
        A11 += tl.load(t + 19)
        A12 += tl.load(t + 20)
        A20 += tl.load(t + 21)
        A21 += tl.load(t + 22)
        A22 += tl.load(t + 23)
        B00 += tl.load(t + 24)
        B01 += tl.load(t + 25)
        B02 += tl.load(t + 26)
        B10 += tl.load(t + 27)
        B11 += tl.load(t + 28)
        B12 += tl.load(t + 29)
        B20 += tl.load(t + 30)
        B21 += tl.load(t + 31)
        B22 += tl.load(t + 32)
        C00 += m
        C11 += m
        C22 += m
        # F = Ic S = [A s; B^T s]; M_ii = S^T F; then F = X_j^T F up the parents
        Fa0, Fa1, Fa2 = _mv(A00, A01, A02, A10, A11, A12, A20, A21, A22, s0, s1, s2)
        Fl0, Fl1, Fl2 = _mtv(B00, B01, B02, B10, B11, B12, B20, B21, B22, s0, s1, s2)
        tl.store(Mrow + i * J + i, s0 * Fa0 + s1 * Fa1 + s2 * Fa2, mask=mask)
        for jj in range(i):
            j = i - jj
            tj = tab + j * 34
            oj = scr + j * (15 * BLOCK)
            e00, e01, e02 = tl.load(oj + 0 * BLOCK), tl.load(oj + 1 * BLOCK), tl.load(oj + 2 * BLOCK)
            e10, e11, e12 = tl.load(oj + 3 * BLOCK), tl.load(oj + 4 * BLOCK), tl.load(oj + 5 * BLOCK)
            e20, e21, e22 = tl.load(oj + 6 * BLOCK), tl.load(oj + 7 * BLOCK), tl.load(oj + 8 * BLOCK)
            Fl0, Fl1, Fl2 = _mtv(e00, e01, e02, e10, e11, e12, e20, e21, e22, Fl0, Fl1, Fl2)
            Fa0, Fa1, Fa2 = _mtv(e00, e01, e02, e10, e11, e12, e20, e21, e22, Fa0, Fa1, Fa2)
            x0, x1, x2 = _cross(tl.load(tj + 9), tl.load(tj + 10), tl.load(tj + 11), Fl0, Fl1, Fl2)
            Fa0, Fa1, Fa2 = Fa0 + x0, Fa1 + x1, Fa2 + x2
            tp = tab + (j - 1) * 34
            mij = tl.load(tp + 12) * Fa0 + tl.load(tp + 13) * Fa1 + tl.load(tp + 14) * Fa2
            tl.store(Mrow + i * J + j - 1, mij, mask=mask)
            tl.store(Mrow + (j - 1) * J + i, mij, mask=mask)
        # carry both to the parent: X^T f and X^T Ic X
        e00, e01, e02 = tl.load(o + 0 * BLOCK), tl.load(o + 1 * BLOCK), tl.load(o + 2 * BLOCK)
        e10, e11, e12 = tl.load(o + 3 * BLOCK), tl.load(o + 4 * BLOCK), tl.load(o + 5 * BLOCK)
        e20, e21, e22 = tl.load(o + 6 * BLOCK), tl.load(o + 7 * BLOCK), tl.load(o + 8 * BLOCK)
        r0, r1, r2 = tl.load(t + 9), tl.load(t + 10), tl.load(t + 11)
        cf0, cf1, cf2 = _mtv(e00, e01, e02, e10, e11, e12, e20, e21, e22, cf0, cf1, cf2)
        cn0, cn1, cn2 = _mtv(e00, e01, e02, e10, e11, e12, e20, e21, e22, cn0, cn1, cn2)
        x0, x1, x2 = _cross(r0, r1, r2, cf0, cf1, cf2)
        cn0, cn1, cn2 = cn0 + x0, cn1 + x1, cn2 + x2
        A00, A01, A02, A10, A11, A12, A20, A21, A22 = _congruence(
            e00, e01, e02, e10, e11, e12, e20, e21, e22, A00, A01, A02, A10, A11, A12, A20, A21, A22)
        B00, B01, B02, B10, B11, B12, B20, B21, B22 = _congruence(
            e00, e01, e02, e10, e11, e12, e20, e21, e22, B00, B01, B02, B10, B11, B12, B20, B21, B22)
        C00, C01, C02, C10, C11, C12, C20, C21, C22 = _congruence(
            e00, e01, e02, e10, e11, e12, e20, e21, e22, C00, C01, C02, C10, C11, C12, C20, C21, C22)
        P00, P01, P02, P10, P11, P12, P20, P21, P22 = _mm(
            B00, B01, B02, B10, B11, B12, B20, B21, B22, 0.0, -r2, r1, r2, 0.0, -r0, -r1, r0, 0.0)
        Q00, Q01, Q02, Q10, Q11, Q12, Q20, Q21, Q22 = _mm(
            0.0, -r2, r1, r2, 0.0, -r0, -r1, r0, 0.0, C00, C01, C02, C10, C11, C12, C20, C21, C22)
        K00, K01, K02, K10, K11, K12, K20, K21, K22 = _mm(
            Q00, Q01, Q02, Q10, Q11, Q12, Q20, Q21, Q22, 0.0, -r2, r1, r2, 0.0, -r0, -r1, r0, 0.0)
        A00, A01, A02 = A00 - P00 - P00 - K00, A01 - P01 - P10 - K01, A02 - P02 - P20 - K02
        A10, A11, A12 = A10 - P10 - P01 - K10, A11 - P11 - P11 - K11, A12 - P12 - P21 - K12
        A20, A21, A22 = A20 - P20 - P02 - K20, A21 - P21 - P12 - K21, A22 - P22 - P22 - K22
        B00, B01, B02 = B00 + Q00, B01 + Q01, B02 + Q02
        B10, B11, B12 = B10 + Q10, B11 + Q11, B12 + Q12
        B20, B21, B22 = B20 + Q20, B21 + Q21, B22 + Q22
    # Cholesky M = L L^T in the lane (column by column), upper triangle zero
    Lrow = L_ptr + rows * (J * J)
    for k in range(J):
        d = tl.load(Mrow + k * J + k, mask=mask, other=1.0)
        for p in range(k):
            x = tl.load(Lrow + k * J + p, mask=mask, other=0.0)
            d -= x * x
        lkk = tl.sqrt(d)
        tl.store(Lrow + k * J + k, lkk, mask=mask)
        for i in range(k + 1, J):
            acc = tl.load(Mrow + i * J + k, mask=mask, other=0.0)
            for p in range(k):
                acc -= tl.load(Lrow + i * J + p, mask=mask, other=0.0) * tl.load(Lrow + k * J + p, mask=mask, other=0.0)
            tl.store(Lrow + i * J + k, acc / lkk, mask=mask)
            tl.store(Lrow + k * J + i, zero, mask=mask)


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

    def forward(self, q, qd):
        B, J = q.shape
        q, qd = q.float().contiguous(), qd.float().contiguous()
        M = torch.empty(B, J, J, device=q.device, dtype=torch.float32)
        L = torch.empty_like(M)
        C = torch.empty_like(q)
        BLOCK = 128 if q.is_cuda else 1024  # one sample per GPU lane; few interpreter programs on CPU
        scratch = torch.empty(triton.cdiv(B, BLOCK) * J * 15 * BLOCK, device=q.device, dtype=torch.float32)
        if B:
            _crba_kernel[(triton.cdiv(B, BLOCK),)](q, qd, M, C, L, self.table.to(q.device), scratch,
                                                   self.gravity.to(q.device), B, J, BLOCK=BLOCK)
        return M, C, L
