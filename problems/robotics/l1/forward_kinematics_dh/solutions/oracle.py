"""Oracle for robotics/l1/forward_kinematics_dh: one Triton program per BLOCK samples.

Each sample's frame lives in registers (the 12 non-trivial entries); every joint applies
the DH closed form and stores the 4x4 frame as one [BLOCK, 16] coalesced tile.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _pick(cols, k: tl.constexpr, value, acc):
    return tl.where(cols[None, :] == k, value[:, None], acc)


@triton.jit
def _fk_dh(q_ptr, dh_ptr, out_ptr, B, J, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < B
    cols = tl.arange(0, 16)
    one = tl.full([BLOCK], 1.0, tl.float32)
    zero = tl.zeros([BLOCK], tl.float32)
    r00, r01, r02, p0 = one, zero, zero, zero
    r10, r11, r12, p1 = zero, one, zero, zero
    r20, r21, r22, p2 = zero, zero, one, zero
    for j in range(J):
        a = tl.load(dh_ptr + j * 4)
        alpha = tl.load(dh_ptr + j * 4 + 1)
        d = tl.load(dh_ptr + j * 4 + 2)
        off = tl.load(dh_ptr + j * 4 + 3)
        t = tl.load(q_ptr + rows * J + j, mask=mask, other=0.0).to(tl.float32) + off
        ct, st = tl.cos(t), tl.sin(t)
        ca, sa = tl.cos(alpha), tl.sin(alpha)
        # A = [[ct, -st ca, st sa, a ct], [st, ct ca, -ct sa, a st], [0, sa, ca, d]]
        for_n0 = r00 * ct + r01 * st
        for_n1 = r10 * ct + r11 * st
        for_n2 = r20 * ct + r21 * st
        m0 = r01 * ct - r00 * st          # R [ -st, ct, 0 ]^T
        m1 = r11 * ct - r10 * st
        m2 = r21 * ct - r20 * st
        p0 = p0 + a * for_n0 + d * r02
        p1 = p1 + a * for_n1 + d * r12
        p2 = p2 + a * for_n2 + d * r22
        n01, n11, n21 = m0 * ca + r02 * sa, m1 * ca + r12 * sa, m2 * ca + r22 * sa
        n02, n12, n22 = r02 * ca - m0 * sa, r12 * ca - m1 * sa, r22 * ca - m2 * sa
        r00, r10, r20 = for_n0, for_n1, for_n2
        r01, r11, r21 = n01, n11, n21
        r02, r12, r22 = n02, n12, n22
        tile = tl.where(cols[None, :] == 15, 1.0, 0.0) + tl.zeros([BLOCK, 16], tl.float32)
        tile = _pick(cols, 0, r00, tile)
        tile = _pick(cols, 1, r01, tile)
        tile = _pick(cols, 2, r02, tile)
        tile = _pick(cols, 3, p0, tile)
        tile = _pick(cols, 4, r10, tile)
        tile = _pick(cols, 5, r11, tile)
        tile = _pick(cols, 6, r12, tile)
        tile = _pick(cols, 7, p1, tile)
        tile = _pick(cols, 8, r20, tile)
        tile = _pick(cols, 9, r21, tile)
        tile = _pick(cols, 10, r22, tile)
        tile = _pick(cols, 11, p2, tile)
        offs = (rows[:, None] * J + j) * 16 + cols[None, :]
        tl.store(out_ptr + offs, tile.to(out_ptr.dtype.element_ty), mask=mask[:, None])


class ModelNew(nn.Module):
    def forward(self, q, dh):
        B, J = q.shape
        q, dh = q.contiguous(), dh.contiguous().float()
        out = torch.empty(B, J, 4, 4, device=q.device, dtype=q.dtype)
        BLOCK = 256
        if B:
            _fk_dh[(triton.cdiv(B, BLOCK),)](q, dh, out, B, J, BLOCK=BLOCK)
        return out
