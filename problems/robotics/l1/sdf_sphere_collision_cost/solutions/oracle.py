"""Oracle for robotics/l1/sdf_sphere_collision_cost: one fused Triton kernel.

A program owns BLOCK_B configurations x all their spheres (a 2D tile): grid coordinates,
the eight corner gathers, interpolated distance, analytic gradient, CHOMP cost and the
per-configuration sum all stay in registers; only cost [B] and grad [B,S,3] are written.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 0.05


@triton.jit
def _sdf_cost_kernel(sdf, origin, voxel_ptr, centres, radii, cost_out, grad_out, B, S, D, H, W,
                     EPS_C: tl.constexpr, BLOCK_B: tl.constexpr, SP: tl.constexpr):
    b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)[:, None]
    s = tl.arange(0, SP)[None, :]
    m = (b < B) & (s < S)
    base = (b * S + s) * 3
    h = tl.load(voxel_ptr)
    gx_raw = (tl.load(centres + base, mask=m, other=0.0) - tl.load(origin)) / h
    gy_raw = (tl.load(centres + base + 1, mask=m, other=0.0) - tl.load(origin + 1)) / h
    gz_raw = (tl.load(centres + base + 2, mask=m, other=0.0) - tl.load(origin + 2)) / h
    wm, hm, dm = (W - 1).to(tl.float32), (H - 1).to(tl.float32), (D - 1).to(tl.float32)
    gx = tl.minimum(tl.maximum(gx_raw, 0.0), wm)
    gy = tl.minimum(tl.maximum(gy_raw, 0.0), hm)
    gz = tl.minimum(tl.maximum(gz_raw, 0.0), dm)
    x0 = tl.minimum(tl.floor(gx), wm - 1.0)
    y0 = tl.minimum(tl.floor(gy), hm - 1.0)
    z0 = tl.minimum(tl.floor(gz), dm - 1.0)
    fx, fy, fz = gx - x0, gy - y0, gz - z0
    i000 = (z0.to(tl.int32) * H + y0.to(tl.int32)) * W + x0.to(tl.int32)
    c000 = tl.load(sdf + i000, mask=m, other=0.0)
    c100 = tl.load(sdf + i000 + 1, mask=m, other=0.0)
    c010 = tl.load(sdf + i000 + W, mask=m, other=0.0)
    c110 = tl.load(sdf + i000 + W + 1, mask=m, other=0.0)
    c001 = tl.load(sdf + i000 + H * W, mask=m, other=0.0)
    c101 = tl.load(sdf + i000 + H * W + 1, mask=m, other=0.0)
    c011 = tl.load(sdf + i000 + H * W + W, mask=m, other=0.0)
    c111 = tl.load(sdf + i000 + H * W + W + 1, mask=m, other=0.0)
    e00, e10, e01, e11 = c100 - c000, c110 - c010, c101 - c001, c111 - c011
    a00, a10, a01, a11 = c000 + fx * e00, c010 + fx * e10, c001 + fx * e01, c011 + fx * e11
    a0 = a00 + fy * (a10 - a00)
    a1 = a01 + fy * (a11 - a01)
    value = a0 + fz * (a1 - a0)
    ex0 = e00 + fy * (e10 - e00)
    ex1 = e01 + fy * (e11 - e01)
    d_fx = ex0 + fz * (ex1 - ex0)
    d_fy = (a10 - a00) + fz * ((a11 - a01) - (a10 - a00))
    d_fz = a1 - a0
    d = value - tl.load(radii + s, mask=s < S, other=0.0)
    cost = tl.where(d < 0, -d + EPS_C / 2, tl.where(d <= EPS_C, (d - EPS_C) * (d - EPS_C) / (2 * EPS_C), 0.0))
    slope = tl.where(d < 0, -1.0, tl.where(d <= EPS_C, (d - EPS_C) / EPS_C, 0.0))
    cost = tl.where(m, cost, 0.0)
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    tl.store(cost_out + rows, tl.sum(cost, axis=1), mask=rows < B)
    gxo = tl.where((gx_raw >= 0) & (gx_raw <= wm), slope * d_fx / h, 0.0)
    gyo = tl.where((gy_raw >= 0) & (gy_raw <= hm), slope * d_fy / h, 0.0)
    gzo = tl.where((gz_raw >= 0) & (gz_raw <= dm), slope * d_fz / h, 0.0)
    tl.store(grad_out + base, gxo, mask=m)
    tl.store(grad_out + base + 1, gyo, mask=m)
    tl.store(grad_out + base + 2, gzo, mask=m)


class ModelNew(nn.Module):
    def forward(self, sdf, origin, voxel, centres, radii):
        D, H, W = sdf.shape
        B, S, _ = centres.shape
        cost = torch.empty(B, device=centres.device, dtype=torch.float32)
        grad = torch.empty(B, S, 3, device=centres.device, dtype=torch.float32)
        SP = triton.next_power_of_2(S)
        BLOCK_B = max(1, (1024 if centres.is_cuda else 4096) // SP)
        if B:
            _sdf_cost_kernel[(triton.cdiv(B, BLOCK_B),)](
                sdf.contiguous(), origin.contiguous(), voxel.reshape(1), centres.contiguous(), radii.contiguous(),
                cost, grad, B, S, D, H, W, EPS_C=EPS, BLOCK_B=BLOCK_B, SP=SP)
        return cost, grad
