"""Oracle for biology/l3/md_langevin_simulation: tiled all-pairs LJ forces + fused BAOAB updates.

Per step two launches: a force kernel (each program owns a block of particles and streams all
others through registers with the minimum image and cutoff; no N x N temporaries) that also
writes per-particle energies, and one elementwise kernel that applies the closing B of this step,
then B, A, O, A of the next step (the two half-kicks merge into one).
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

R_CUT = 2.5
DT, GAMMA, KT = 0.005, 1.0, 1.0


@triton.jit
def _lj_forces(x, box_ptr, f, e, n, rc2, shift, BI: tl.constexpr, BJ: tl.constexpr):
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    i_ok = i < n
    box = tl.load(box_ptr)
    xi = tl.load(x + i * 3 + 0, mask=i_ok, other=0.0)
    yi = tl.load(x + i * 3 + 1, mask=i_ok, other=0.0)
    zi = tl.load(x + i * 3 + 2, mask=i_ok, other=0.0)
    fx = tl.zeros([BI], dtype=tl.float32)
    fy = tl.zeros([BI], dtype=tl.float32)
    fz = tl.zeros([BI], dtype=tl.float32)
    en = tl.zeros([BI], dtype=tl.float32)
    for j0 in range(0, n, BJ):
        j = j0 + tl.arange(0, BJ)
        j_ok = j < n
        dx = xi[:, None] - tl.load(x + j * 3 + 0, mask=j_ok, other=0.0)[None, :]
        dy = yi[:, None] - tl.load(x + j * 3 + 1, mask=j_ok, other=0.0)[None, :]
        dz = zi[:, None] - tl.load(x + j * 3 + 2, mask=j_ok, other=0.0)[None, :]
        dx -= box * tl.floor(dx / box + 0.5)
        dy -= box * tl.floor(dy / box + 0.5)
        dz -= box * tl.floor(dz / box + 0.5)
        r2 = dx * dx + dy * dy + dz * dz
        inside = (r2 < rc2) & (r2 > 0.0) & j_ok[None, :] & i_ok[:, None]
        inv2 = tl.where(inside, 1.0 / tl.where(inside, r2, 1.0), 0.0)
        inv6 = inv2 * inv2 * inv2
        fmag = (48.0 * inv6 * inv6 - 24.0 * inv6) * inv2
        fx += tl.sum(fmag * dx, axis=1)
        fy += tl.sum(fmag * dy, axis=1)
        fz += tl.sum(fmag * dz, axis=1)
        en += tl.sum(tl.where(inside, 4.0 * (inv6 * inv6 - inv6) - shift, 0.0), axis=1)
    tl.store(f + i * 3 + 0, fx, mask=i_ok)
    tl.store(f + i * 3 + 1, fy, mask=i_ok)
    tl.store(f + i * 3 + 2, fz, mask=i_ok)
    tl.store(e + i, 0.5 * en, mask=i_ok)


@triton.jit
def _baoab(x, v, f, noise, n3, kick, c1, c2, dt, DRIFT: tl.constexpr, BLOCK: tl.constexpr):
    """v += kick * f; then (if DRIFT) x += dt/2 v; v = c1 v + c2 xi; x += dt/2 v."""
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = k < n3
    vel = tl.load(v + k, mask=ok, other=0.0) + kick * tl.load(f + k, mask=ok, other=0.0)
    if DRIFT:
        pos = tl.load(x + k, mask=ok, other=0.0) + 0.5 * dt * vel
        vel = c1 * vel + c2 * tl.load(noise + k, mask=ok, other=0.0)
        pos = pos + 0.5 * dt * vel
        tl.store(x + k, pos, mask=ok)
    tl.store(v + k, vel, mask=ok)


class ModelNew(nn.Module):
    def forward(self, x0, v0, box, noise):
        n = x0.shape[0]
        steps = noise.shape[0]
        c1 = math.exp(-GAMMA * DT)
        c2 = math.sqrt(1 - c1 * c1) * math.sqrt(KT)
        x, v = x0.contiguous().clone(), v0.contiguous().clone()
        f = torch.empty_like(x)
        e = torch.empty(steps, n, device=x.device, dtype=x.dtype)
        scratch_e = torch.empty(n, device=x.device, dtype=x.dtype)
        on_gpu = x.is_cuda
        bi, bj = (64, 64) if on_gpu else (256, 512)
        block = 1024 if on_gpu else 8192
        rc2, shift = R_CUT * R_CUT, 4 * (R_CUT ** -12 - R_CUT ** -6)
        force_grid = (triton.cdiv(n, bi),)
        upd_grid = (triton.cdiv(3 * n, block),)
        _lj_forces[force_grid](x, box, f, scratch_e, n, rc2, shift, BI=bi, BJ=bj)
        noise = noise.contiguous()
        for step in range(steps):
            kick = 0.5 * DT if step == 0 else DT  # closing B of the previous step + opening B
            _baoab[upd_grid](x, v, f, noise[step], 3 * n, kick, c1, c2, DT, DRIFT=True, BLOCK=block)
            _lj_forces[force_grid](x, box, f, e[step], n, rc2, shift, BI=bi, BJ=bj)
        _baoab[upd_grid](x, v, f, noise[0], 3 * n, 0.5 * DT, c1, c2, DT, DRIFT=False, BLOCK=block)
        return x, v, e.sum(1)
