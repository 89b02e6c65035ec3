"""Oracle for robotics/l3/convex_contact_pipeline: torch sort-and-sweep broad phase, Triton
programs of 4-16 candidate pairs for the SAT.

Each program poses both bodies' vertices in registers (coordinates relative to body i), then walks
the axis list (faces of i, faces of j, edge pairs) in blocks: every lane builds its axis (a rotated
face normal, or the normalized cross product of two rotated edge directions), projects both vertex
sets and keeps the running minimum overlap with its first axis. Contacts are compacted afterwards.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

CANDIDATES_PER_CHUNK = 2 ** 22


@triton.jit
def _mat(R, rows, m, k: tl.constexpr):
    return tl.load(R + rows * 9 + k, mask=m, other=0.0)[:, None]      # [BLOCK_P, 1]


@triton.jit
def _sat_pairs(tv, tn, te, tid, rot, trans, cand, depth_out, normal_out, Q, V, F, E,
               BLOCK_P: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_A: tl.constexpr):
    q = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    qm = q < Q
    i = tl.load(cand + 2 * q, mask=qm, other=0)
    j = tl.load(cand + 2 * q + 1, mask=qm, other=0)
    ti = tl.load(tid + i, mask=qm, other=0)[:, None]
    tj = tl.load(tid + j, mask=qm, other=0)[:, None]
    a00, a01, a02 = _mat(rot, i, qm, 0), _mat(rot, i, qm, 1), _mat(rot, i, qm, 2)
    a10, a11, a12 = _mat(rot, i, qm, 3), _mat(rot, i, qm, 4), _mat(rot, i, qm, 5)
    a20, a21, a22 = _mat(rot, i, qm, 6), _mat(rot, i, qm, 7), _mat(rot, i, qm, 8)
    b00, b01, b02 = _mat(rot, j, qm, 0), _mat(rot, j, qm, 1), _mat(rot, j, qm, 2)
    b10, b11, b12 = _mat(rot, j, qm, 3), _mat(rot, j, qm, 4), _mat(rot, j, qm, 5)
    b20, b21, b22 = _mat(rot, j, qm, 6), _mat(rot, j, qm, 7), _mat(rot, j, qm, 8)
    off_x = tl.load(trans + j * 3, mask=qm, other=0.0) - tl.load(trans + i * 3, mask=qm, other=0.0)
    off_y = tl.load(trans + j * 3 + 1, mask=qm, other=0.0) - tl.load(trans + i * 3 + 1, mask=qm, other=0.0)
    off_z = tl.load(trans + j * 3 + 2, mask=qm, other=0.0) - tl.load(trans + i * 3 + 2, mask=qm, other=0.0)
    ox, oy, oz = off_x[:, None], off_y[:, None], off_z[:, None]
    # both bodies' vertices, posed relative to body i: [BLOCK_P, BLOCK_V]
    v = tl.arange(0, BLOCK_V)[None, :]
    vm = (v < V) & qm[:, None]
    vx = tl.load(tv + (ti * V + v) * 3, mask=vm, other=0.0)
    vy = tl.load(tv + (ti * V + v) * 3 + 1, mask=vm, other=0.0)
    vz = tl.load(tv + (ti * V + v) * 3 + 2, mask=vm, other=0.0)
    ax = a00 * vx + a01 * vy + a02 * vz
    ay = a10 * vx + a11 * vy + a12 * vz
    az = a20 * vx + a21 * vy + a22 * vz
    vx = tl.load(tv + (tj * V + v) * 3, mask=vm, other=0.0)
    vy = tl.load(tv + (tj * V + v) * 3 + 1, mask=vm, other=0.0)
    vz = tl.load(tv + (tj * V + v) * 3 + 2, mask=vm, other=0.0)
    bx = b00 * vx + b01 * vy + b02 * vz + ox
    by = b10 * vx + b11 * vy + b12 * vz + oy
    bz = b20 * vx + b21 * vy + b22 * vz + oz
    vmask = vm[:, None, :]

    best = tl.full([BLOCK_P], float("inf"), tl.float32)
    nx_best = tl.zeros([BLOCK_P], tl.float32)
    ny_best = tl.zeros([BLOCK_P], tl.float32)
    nz_best = tl.zeros([BLOCK_P], tl.float32)
    n_axes = 2 * F + E * E
    for a0 in range(0, n_axes, BLOCK_A):
        k = a0 + tl.arange(0, BLOCK_A)[None, :]                      # [1, BLOCK_A]
        km = (k < n_axes) & qm[:, None]
        is_fi = k < F
        is_fj = (k >= F) & (k < 2 * F)
        is_e = (k >= 2 * F) & km
        # face normals (of i, then of j), rotated by their body
        f = tl.where(is_fi, k, k - F)
        tf = tl.where(is_fi, ti, tj)
        fm = (is_fi | is_fj) & km
        fx = tl.load(tn + (tf * F + f) * 3, mask=fm, other=0.0)
        fy = tl.load(tn + (tf * F + f) * 3 + 1, mask=fm, other=0.0)
        fz = tl.load(tn + (tf * F + f) * 3 + 2, mask=fm, other=0.0)
        nx = tl.where(is_fi, a00 * fx + a01 * fy + a02 * fz, b00 * fx + b01 * fy + b02 * fz)
        ny = tl.where(is_fi, a10 * fx + a11 * fy + a12 * fz, b10 * fx + b11 * fy + b12 * fz)
        nz = tl.where(is_fi, a20 * fx + a21 * fy + a22 * fz, b20 * fx + b21 * fy + b22 * fz)
        # edge pair (ea of i, eb of j): normalized cross product of the rotated directions
        kk = tl.where(is_e, k - 2 * F, 0)
        ea = kk // E
        eb = kk % E
        ex = tl.load(te + (ti * E + ea) * 3, mask=is_e, other=0.0)
        ey = tl.load(te + (ti * E + ea) * 3 + 1, mask=is_e, other=0.0)
        ez = tl.load(te + (ti * E + ea) * 3 + 2, mask=is_e, other=0.0)
        uax = a00 * ex + a01 * ey + a02 * ez
        uay = a10 * ex + a11 * ey + a12 * ez
        uaz = a20 * ex + a21 * ey + a22 * ez
        ex = tl.load(te + (tj * E + eb) * 3, mask=is_e, other=0.0)
        ey = tl.load(te + (tj * E + eb) * 3 + 1, mask=is_e, other=0.0)
        ez = tl.load(te + (tj * E + eb) * 3 + 2, mask=is_e, other=0.0)
        ubx = b00 * ex + b01 * ey + b02 * ez
        uby = b10 * ex + b11 * ey + b12 * ez
        ubz = b20 * ex + b21 * ey + b22 * ez
        cx = uay * ubz - uaz * uby
        cy = uaz * ubx - uax * ubz
        cz = uax * uby - uay * ubx
        length = tl.sqrt(cx * cx + cy * cy + cz * cz)
        valid = length >= 1e-6
        safe = tl.where(valid, length, 1.0)
        nx = tl.where(is_e, cx / safe, nx)
        ny = tl.where(is_e, cy / safe, ny)
        nz = tl.where(is_e, cz / safe, nz)
        # projections [BLOCK_P, BLOCK_A, BLOCK_V]
        pa = nx[:, :, None] * ax[:, None, :] + ny[:, :, None] * ay[:, None, :] + nz[:, :, None] * az[:, None, :]
        pb = nx[:, :, None] * bx[:, None, :] + ny[:, :, None] * by[:, None, :] + nz[:, :, None] * bz[:, None, :]
        max_a = tl.max(tl.where(vmask, pa, -float("inf")), axis=2)
        min_a = tl.min(tl.where(vmask, pa, float("inf")), axis=2)
        max_b = tl.max(tl.where(vmask, pb, -float("inf")), axis=2)
        min_b = tl.min(tl.where(vmask, pb, float("inf")), axis=2)
        overlap = tl.minimum(max_a - min_b, max_b - min_a)
        overlap = tl.where(km & ((k < 2 * F) | valid), overlap, float("inf"))
        block_min = tl.min(overlap, axis=1)
        first = tl.argmin(overlap, axis=1)                            # first minimum in the block
        pick = tl.arange(0, BLOCK_A)[None, :] == first[:, None]     # first is relative to the block
        better = block_min < best                                     # strict: earlier blocks win ties
        nx_best = tl.where(better, tl.sum(tl.where(pick, nx, 0.0), axis=1), nx_best)
        ny_best = tl.where(better, tl.sum(tl.where(pick, ny, 0.0), axis=1), ny_best)
        nz_best = tl.where(better, tl.sum(tl.where(pick, nz, 0.0), axis=1), nz_best)
        best = tl.where(better, block_min, best)
    toward = nx_best * off_x + ny_best * off_y + nz_best * off_z
    sign = tl.where(toward < 0, -1.0, 1.0)
    tl.store(depth_out + q, best, mask=qm)
    tl.store(normal_out + q * 3, sign * nx_best, mask=qm)
    tl.store(normal_out + q * 3 + 1, sign * ny_best, mask=qm)
    tl.store(normal_out + q * 3 + 2, sign * nz_best, mask=qm)


def broad_phase(lo, hi):
    """Pairs (i < j) with overlapping closed AABBs, sorted by (i, j) (sort and sweep on x)."""
    n = lo.shape[0]
    order = torch.argsort(lo[:, 0], stable=True)
    lo_s, hi_s = lo[order], hi[order]
    end = torch.searchsorted(lo_s[:, 0].contiguous(), hi_s[:, 0].contiguous(), right=True)
    start = torch.arange(1, n + 1, device=lo.device)
    counts = (end - start).clamp(min=0)
    cum = torch.cumsum(counts, 0)
    found, first = [], 0
    while first < n:
        done_before = int(cum[first - 1]) if first else 0
        last = max(int(torch.searchsorted(cum, done_before + CANDIDATES_PER_CHUNK, right=True)), first + 1)
        i = torch.repeat_interleave(torch.arange(first, last, device=lo.device), counts[first:last])
        offset = torch.arange(i.numel(), device=lo.device) - torch.repeat_interleave(
            cum[first:last] - counts[first:last] - done_before, counts[first:last])
        j = start[i] + offset
        keep = ((lo_s[i, 1:] <= hi_s[j, 1:]) & (lo_s[j, 1:] <= hi_s[i, 1:])).all(-1)
        a, b = order[i[keep]], order[j[keep]]
        found.append(torch.stack([torch.minimum(a, b), torch.maximum(a, b)], -1))
        first = last
    pairs = torch.cat(found) if found else torch.empty(0, 2, dtype=torch.long, device=lo.device)
    return pairs[torch.argsort(pairs[:, 0] * n + pairs[:, 1])]


class ModelNew(nn.Module):
    def forward(self, template_vertices, template_normals, template_edges, template_id, rotation, translation):
        tv, tn, te = (t.contiguous() for t in (template_vertices, template_normals, template_edges))
        rot, trans = rotation.contiguous(), translation.contiguous()
        world = tv[template_id] @ rot.transpose(1, 2) + trans[:, None]
        candidates = broad_phase(world.amin(1), world.amax(1)).contiguous()
        Q = candidates.shape[0]
        V, F, E = tv.shape[1], tn.shape[1], te.shape[1]
        depth = torch.empty(Q, dtype=tv.dtype, device=tv.device)
        normal = torch.empty(Q, 3, dtype=tv.dtype, device=tv.device)
        if Q:
            block_v = triton.next_power_of_2(V)
            block_p = 16 if block_v <= 16 else 4                  # about 8K projections per program
            block_a = min(triton.next_power_of_2(2 * F + E * E), max(16, 8192 // (block_v * block_p)))
            _sat_pairs[(triton.cdiv(Q, block_p),)](tv, tn, te, template_id.contiguous(), rot, trans, candidates,
                                                    depth, normal, Q, V, F, E,
                                                    BLOCK_P=block_p, BLOCK_V=block_v, BLOCK_A=block_a)
        contact = depth > 0
        return candidates[contact], depth[contact], normal[contact]
