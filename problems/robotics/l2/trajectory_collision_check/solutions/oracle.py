"""Oracle for robotics/l2/trajectory_collision_check: FK, sphere transforms and box SDFs in one kernel.

One lane per waypoint walks the chain once; right after joint j's frame is known it places
the spheres riding on link j (spheres are grouped by link on the host, a tiny argsort) and
takes the minimum of sdf - r over every box, so no frame or sphere centre touches memory.
A second small kernel scans each trajectory's clearances for the first negative one.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _clearance_kernel(q_ptr, tab, sph_ptr, start_ptr, box_ptr, out_ptr, NW, J, O, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < NW
    one = tl.full([BLOCK], 1.0, tl.float32)
    zero = tl.zeros([BLOCK], tl.float32)
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = one, zero, zero, zero, one, zero, zero, zero, one
    p0, p1, p2 = zero, zero, zero
    best = tl.full([BLOCK], float("inf"), tl.float32)
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
        for s in range(tl.load(start_ptr + j), tl.load(start_ptr + j + 1)):   # spheres on link j
            sp = sph_ptr + s * 4
            lx, ly, lz, radius = tl.load(sp + 0), tl.load(sp + 1), tl.load(sp + 2), tl.load(sp + 3)
            cx = r00 * lx + r01 * ly + r02 * lz + p0
            cy = r10 * lx + r11 * ly + r12 * lz + p1
            cz = r20 * lx + r21 * ly + r22 * lz + p2
            for o in range(O):
                b = box_ptr + o * 15              # centre (3), rotation row-major (9), half-extents (3)
                dx = cx - tl.load(b + 0)
                dy = cy - tl.load(b + 1)
                dz = cz - tl.load(b + 2)
                e0 = tl.abs(tl.load(b + 3) * dx + tl.load(b + 6) * dy + tl.load(b + 9) * dz) - tl.load(b + 12)
                e1 = tl.abs(tl.load(b + 4) * dx + tl.load(b + 7) * dy + tl.load(b + 10) * dz) - tl.load(b + 13)
                e2 = tl.abs(tl.load(b + 5) * dx + tl.load(b + 8) * dy + tl.load(b + 11) * dz) - tl.load(b + 14)
                o0, o1, o2 = tl.maximum(e0, 0.0), tl.maximum(e1, 0.0), tl.maximum(e2, 0.0)
                sdf = tl.sqrt(o0 * o0 + o1 * o1 + o2 * o2) + tl.minimum(tl.maximum(tl.maximum(e0, e1), e2), 0.0)
                best = tl.minimum(best, sdf - radius)
    tl.store(out_ptr + rows, best, mask=mask)


@triton.jit
def _first_hit_kernel(clear_ptr, colliding_ptr, first_ptr, B, T, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < B
    first = tl.full([BLOCK], -1, tl.int64)
    for t in range(T):
        c = tl.load(clear_ptr + rows * T + t, mask=mask, other=1.0)
        first = tl.where((first < 0) & (c < 0), t, first)
    tl.store(first_ptr + rows, first, mask=mask)
    tl.store(colliding_ptr + rows, (first >= 0).to(tl.uint8), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, R_f, p_f, axis):
        super().__init__()
        n = R_f.shape[0]
        self.register_buffer("table", torch.cat([R_f.reshape(n, 9), p_f, axis], 1).float().contiguous())

    def forward(self, q, sphere_link, sphere_centre, sphere_radius, box_centre, box_rotation, box_half):
        B, T, J = q.shape
        dev = q.device
        order = torch.argsort(sphere_link, stable=True)                 # spheres grouped by link
        spheres = torch.cat([sphere_centre, sphere_radius[:, None]], 1)[order].float().contiguous()
        links = torch.arange(J + 1, device=dev, dtype=sphere_link.dtype)
        start = torch.searchsorted(sphere_link[order].contiguous(), links).to(torch.int32)   # no host sync
        boxes = torch.cat([box_centre, box_rotation.reshape(-1, 9), box_half], 1).float().contiguous()
        clearance = torch.empty(B, T, dtype=torch.float32, device=dev)
        colliding = torch.empty(B, dtype=torch.bool, device=dev)
        first_hit = torch.empty(B, dtype=torch.int64, device=dev)
        BLOCK = 128 if q.is_cuda else 4096
        NW = B * T
        if NW:
            _clearance_kernel[(triton.cdiv(NW, BLOCK),)](q.float().contiguous(), self.table.to(dev), spheres, start,
                                                         boxes, clearance, NW, J, box_centre.shape[0], BLOCK=BLOCK)
        if B:
            _first_hit_kernel[(triton.cdiv(B, BLOCK),)](clearance, colliding.view(torch.uint8), first_hit, B, T,
                                                        BLOCK=BLOCK)
        return clearance, colliding, first_hit
