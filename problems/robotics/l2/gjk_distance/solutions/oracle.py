"""Oracle for robotics/l2/gjk_distance: GJK with a register-resident Johnson sub-algorithm.

One lane per pair, float64 throughout like the reference. The support mapping scans the
vertices with a running argmax; the sub-algorithm evaluates the affine projection of the
origin onto each of the 15 faces of the simplex in closed form (segment, triangle by a 2x2
solve, tetrahedron by Cramer's rule) and keeps the shortest feasible one. The loop stops as
soon as every lane of the block has converged.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

LAM_TOL = 1e-12


@triton.jit
def _dot(a0, a1, a2, b0, b1, b2):
    return a0 * b0 + a1 * b1 + a2 * b2


@triton.jit
def _take(take, best_vv, bv0, bv1, bv2, k0, k1, k2, k3, vv, v0, v1, v2, n0, n1, n2, n3):
    """Replace the running best face where `take` holds."""
    return (tl.where(take, vv, best_vv), tl.where(take, v0, bv0), tl.where(take, v1, bv1), tl.where(take, v2, bv2),
            tl.where(take, n0, k0), tl.where(take, n1, k1), tl.where(take, n2, k2), tl.where(take, n3, k3))


@triton.jit
def _segment(p0, p1, p2, q0, q1, q2):
    e0, e1, e2 = q0 - p0, q1 - p1, q2 - p2
    lq = -_dot(p0, p1, p2, e0, e1, e2) / _dot(e0, e1, e2, e0, e1, e2)
    lp = 1.0 - lq
    v0, v1, v2 = p0 + lq * e0, p1 + lq * e1, p2 + lq * e2
    ok = (lp >= -1e-12) & (lq >= -1e-12)
    return ok, lp, lq, v0, v1, v2


@triton.jit
def _triangle(p0, p1, p2, q0, q1, q2, r0, r1, r2):
    a0, a1, a2 = q0 - p0, q1 - p1, q2 - p2
    b0, b1, b2 = r0 - p0, r1 - p1, r2 - p2
    aa, ab, bb = _dot(a0, a1, a2, a0, a1, a2), _dot(a0, a1, a2, b0, b1, b2), _dot(b0, b1, b2, b0, b1, b2)
    pa, pb = _dot(p0, p1, p2, a0, a1, a2), _dot(p0, p1, p2, b0, b1, b2)
    det = aa * bb - ab * ab
    lq = (-pa * bb + pb * ab) / det
    lr = (-pb * aa + pa * ab) / det
    lp = 1.0 - lq - lr
    v0, v1, v2 = p0 + lq * a0 + lr * b0, p1 + lq * a1 + lr * b1, p2 + lq * a2 + lr * b2
    ok = (lp >= -1e-12) & (lq >= -1e-12) & (lr >= -1e-12)
    return ok, lp, lq, lr, v0, v1, v2


@triton.jit
def _tetrahedron(p0, p1, p2, q0, q1, q2, r0, r1, r2, s0, s1, s2):
    a0, a1, a2 = q0 - p0, q1 - p1, q2 - p2
    b0, b1, b2 = r0 - p0, r1 - p1, r2 - p2
    c0, c1, c2 = s0 - p0, s1 - p1, s2 - p2
    g00, g01, g02 = _dot(a0, a1, a2, a0, a1, a2), _dot(a0, a1, a2, b0, b1, b2), _dot(a0, a1, a2, c0, c1, c2)
    g11, g12, g22 = _dot(b0, b1, b2, b0, b1, b2), _dot(b0, b1, b2, c0, c1, c2), _dot(c0, c1, c2, c0, c1, c2)
    h0 = -_dot(p0, p1, p2, a0, a1, a2)
    h1 = -_dot(p0, p1, p2, b0, b1, b2)
    h2 = -_dot(p0, p1, p2, c0, c1, c2)
    det = g00 * (g11 * g22 - g12 * g12) - g01 * (g01 * g22 - g12 * g02) + g02 * (g01 * g12 - g11 * g02)
    lq = (h0 * (g11 * g22 - g12 * g12) - g01 * (h1 * g22 - g12 * h2) + g02 * (h1 * g12 - g11 * h2)) / det
    lr = (g00 * (h1 * g22 - g12 * h2) - h0 * (g01 * g22 - g12 * g02) + g02 * (g01 * h2 - h1 * g02)) / det
    ls = (g00 * (g11 * h2 - h1 * g12) - g01 * (g01 * h2 - h1 * g02) + h0 * (g01 * g12 - g11 * g02)) / det
    lp = 1.0 - lq - lr - ls
    v0 = p0 + lq * a0 + lr * b0 + ls * c0
    v1 = p1 + lq * a1 + lr * b1 + ls * c1
    v2 = p2 + lq * a2 + lr * b2 + ls * c2
    ok = (lp >= -1e-12) & (lq >= -1e-12) & (lr >= -1e-12) & (ls >= -1e-12)
    return ok, lp, lq, lr, ls, v0, v1, v2


@triton.jit
def _gjk_kernel(A, Bv, out, n_pairs, NA, NB, MAX_ITER: tl.constexpr, EPS_REL: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < n_pairs
    pa_ptr = A + rows * (NA * 3)
    pb_ptr = Bv + rows * (NB * 3)
    zero = tl.zeros([BLOCK], tl.float64)
    v0 = tl.load(pa_ptr, mask=mask, other=0.0).to(tl.float64) - tl.load(pb_ptr, mask=mask, other=0.0).to(tl.float64)
    v1 = tl.load(pa_ptr + 1, mask=mask, other=0.0).to(tl.float64) - tl.load(pb_ptr + 1, mask=mask, other=0.0).to(tl.float64)
    v2 = tl.load(pa_ptr + 2, mask=mask, other=0.0).to(tl.float64) - tl.load(pb_ptr + 2, mask=mask, other=0.0).to(tl.float64)
    w00, w01, w02, w10, w11, w12 = zero, zero, zero, zero, zero, zero
    w20, w21, w22, w30, w31, w32 = zero, zero, zero, zero, zero, zero
    no = rows < 0
    a0, a1, a2, a3 = no, no, no, no
    done = ~mask
    it = tl.program_id(0) * 0                 # an int32 scalar tensor (loop-carried)
    remaining = tl.sum((~done).to(tl.int32), axis=0)
    while (it < MAX_ITER) & (remaining > 0):
        # support point of A - B in direction -v (first maximum on ties)
        best_a, best_b = zero - float("inf"), zero - float("inf")
        sa0, sa1, sa2, sb0, sb1, sb2 = zero, zero, zero, zero, zero, zero
        for i in range(NA):
            x = tl.load(pa_ptr + i * 3, mask=mask, other=0.0).to(tl.float64)
            y = tl.load(pa_ptr + i * 3 + 1, mask=mask, other=0.0).to(tl.float64)
            z = tl.load(pa_ptr + i * 3 + 2, mask=mask, other=0.0).to(tl.float64)
            dot = -(x * v0 + y * v1 + z * v2)
            up = dot > best_a
            best_a = tl.where(up, dot, best_a)
            sa0, sa1, sa2 = tl.where(up, x, sa0), tl.where(up, y, sa1), tl.where(up, z, sa2)
        for i in range(NB):
            x = tl.load(pb_ptr + i * 3, mask=mask, other=0.0).to(tl.float64)
            y = tl.load(pb_ptr + i * 3 + 1, mask=mask, other=0.0).to(tl.float64)
            z = tl.load(pb_ptr + i * 3 + 2, mask=mask, other=0.0).to(tl.float64)
            dot = x * v0 + y * v1 + z * v2
            up = dot > best_b
            best_b = tl.where(up, dot, best_b)
            sb0, sb1, sb2 = tl.where(up, x, sb0), tl.where(up, y, sb1), tl.where(up, z, sb2)
        w0, w1, w2 = sa0 - sb0, sa1 - sb1, sa2 - sb2
        vv = _dot(v0, v1, v2, v0, v1, v2)
        rep = (a0 & (tl.abs(w00 - w0) + tl.abs(w01 - w1) + tl.abs(w02 - w2) < 1e-12))
        rep = rep | (a1 & (tl.abs(w10 - w0) + tl.abs(w11 - w1) + tl.abs(w12 - w2) < 1e-12))
        rep = rep | (a2 & (tl.abs(w20 - w0) + tl.abs(w21 - w1) + tl.abs(w22 - w2) < 1e-12))
        rep = rep | (a3 & (tl.abs(w30 - w0) + tl.abs(w31 - w1) + tl.abs(w32 - w2) < 1e-12))
        done = done | (vv - _dot(v0, v1, v2, w0, w1, w2) <= EPS_REL * vv) | rep | (vv < 1e-20)
        upd = ~done
        # insert w into the first free slot
        f0 = upd & ~a0
        f1 = upd & a0 & ~a1
        f2 = upd & a0 & a1 & ~a2
        f3 = upd & a0 & a1 & a2 & ~a3
        w00, w01, w02 = tl.where(f0, w0, w00), tl.where(f0, w1, w01), tl.where(f0, w2, w02)
        w10, w11, w12 = tl.where(f1, w0, w10), tl.where(f1, w1, w11), tl.where(f1, w2, w12)
        w20, w21, w22 = tl.where(f2, w0, w20), tl.where(f2, w1, w21), tl.where(f2, w2, w22)
        w30, w31, w32 = tl.where(f3, w0, w30), tl.where(f3, w1, w31), tl.where(f3, w2, w32)
        a0, a1, a2, a3 = a0 | f0, a1 | f1, a2 | f2, a3 | f3
        # Johnson's sub-algorithm over the faces in the reference's order (bit i = vertex i)
        bvv = zero + float("inf")
        b0, b1, b2 = v0, v1, v2
        k0, k1, k2, k3 = a0, a1, a2, a3
        t = a0 & (_dot(w00, w01, w02, w00, w01, w02) < bvv)                                     # {0}
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3,
                                                _dot(w00, w01, w02, w00, w01, w02), w00, w01, w02, ~no, no, no, no)
        t = a1 & (_dot(w10, w11, w12, w10, w11, w12) < bvv)                                     # {1}
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3,
                                                _dot(w10, w11, w12, w10, w11, w12), w10, w11, w12, no, ~no, no, no)
        ok, lp, lq, x0, x1, x2 = _segment(w00, w01, w02, w10, w11, w12)                          # {0,1}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a1 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, lq > 1e-12, no, no)
        t = a2 & (_dot(w20, w21, w22, w20, w21, w22) < bvv)                                     # {2}
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3,
                                                _dot(w20, w21, w22, w20, w21, w22), w20, w21, w22, no, no, ~no, no)
        ok, lp, lq, x0, x1, x2 = _segment(w00, w01, w02, w20, w21, w22)                          # {0,2}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a2 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, no, lq > 1e-12, no)
        ok, lp, lq, x0, x1, x2 = _segment(w10, w11, w12, w20, w21, w22)                          # {1,2}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a1 & a2 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                no, lp > 1e-12, lq > 1e-12, no)
        ok, lp, lq, lr, x0, x1, x2 = _triangle(w00, w01, w02, w10, w11, w12, w20, w21, w22)      # {0,1,2}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a1 & a2 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, lq > 1e-12, lr > 1e-12, no)
        t = a3 & (_dot(w30, w31, w32, w30, w31, w32) < bvv)                                     # {3}
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3,
                                                _dot(w30, w31, w32, w30, w31, w32), w30, w31, w32, no, no, no, ~no)
        ok, lp, lq, x0, x1, x2 = _segment(w00, w01, w02, w30, w31, w32)                          # {0,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, no, no, lq > 1e-12)
        ok, lp, lq, x0, x1, x2 = _segment(w10, w11, w12, w30, w31, w32)                          # {1,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a1 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                no, lp > 1e-12, no, lq > 1e-12)
        ok, lp, lq, lr, x0, x1, x2 = _triangle(w00, w01, w02, w10, w11, w12, w30, w31, w32)      # {0,1,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a1 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, lq > 1e-12, no, lr > 1e-12)
        ok, lp, lq, x0, x1, x2 = _segment(w20, w21, w22, w30, w31, w32)                          # {2,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a2 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                no, no, lp > 1e-12, lq > 1e-12)
        ok, lp, lq, lr, x0, x1, x2 = _triangle(w00, w01, w02, w20, w21, w22, w30, w31, w32)      # {0,2,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a2 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, no, lq > 1e-12, lr > 1e-12)
        ok, lp, lq, lr, x0, x1, x2 = _triangle(w10, w11, w12, w20, w21, w22, w30, w31, w32)      # {1,2,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a1 & a2 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                no, lp > 1e-12, lq > 1e-12, lr > 1e-12)
        ok, lp, lq, lr, ls, x0, x1, x2 = _tetrahedron(w00, w01, w02, w10, w11, w12,
                                                      w20, w21, w22, w30, w31, w32)               # {0,1,2,3}
        s = _dot(x0, x1, x2, x0, x1, x2)
        t = a0 & a1 & a2 & a3 & ok & (s < bvv)
        bvv, b0, b1, b2, k0, k1, k2, k3 = _take(t, bvv, b0, b1, b2, k0, k1, k2, k3, s, x0, x1, x2,
                                                lp > 1e-12, lq > 1e-12, lr > 1e-12, ls > 1e-12)
        v0, v1, v2 = tl.where(upd, b0, v0), tl.where(upd, b1, v1), tl.where(upd, b2, v2)
        a0, a1, a2, a3 = tl.where(upd, k0, a0), tl.where(upd, k1, a1), tl.where(upd, k2, a2), tl.where(upd, k3, a3)
        it += 1
        remaining = tl.sum((~done).to(tl.int32), axis=0)
    tl.store(out + rows, tl.sqrt(_dot(v0, v1, v2, v0, v1, v2)).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, max_iter: int = 64, eps_rel: float = 1e-10):
        super().__init__()
        self.max_iter, self.eps = max_iter, eps_rel

    def forward(self, A, Bv):
        n = A.shape[0]
        out = torch.empty(n, device=A.device, dtype=torch.float32)
        BLOCK = 64 if A.is_cuda else 1024
        if n:
            _gjk_kernel[(triton.cdiv(n, BLOCK),)](A.float().contiguous(), Bv.float().contiguous(), out, n,
                                                  A.shape[1], Bv.shape[1], MAX_ITER=self.max_iter,
                                                  EPS_REL=self.eps, BLOCK=BLOCK)
        return out
