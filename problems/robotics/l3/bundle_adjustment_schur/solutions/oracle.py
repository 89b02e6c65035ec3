"""Oracle for robotics/l3/bundle_adjustment_schur: Triton kernels around a float64 Cholesky.

1. one lane per observation: residual and Jacobians in float32, then U, V, g_c, g_p (float64
   atomics), W_m (stored) and the cost;
2. one lane per point: V^-1 by the adjugate and y_p = V^-1 g_p;
3. one lane per observation pair: W_m1 V^-1 W_m2^T added into the dense S in float64;
   one lane per observation: W_m y_p into the right-hand side;
4. S = blockdiag(U) - ... solved by torch Cholesky (cuSOLVER), then W^T dc, the point
   back-substitution and update, and the cost after the step.
Small per-camera work (Exp/Log of C rotations) is torch glue.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def hat(v):
    x, y, z = v.unbind(-1)
    zero = torch.zeros_like(x)
    return torch.stack([torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1),
                        torch.stack([-y, x, zero], -1)], -2)


def so3_exp(omega):
    theta2 = (omega * omega).sum(-1)[..., None, None]
    theta = theta2.sqrt()
    small = theta < 1e-4
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(safe) / safe)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(safe)) / (safe * safe))
    k = hat(omega)
    return torch.eye(3, dtype=omega.dtype, device=omega.device) + a * k + b * (k @ k)


def so3_log(R):
    v = 0.5 * torch.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    sin = v.norm(dim=-1)
    cos = 0.5 * (R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2] - 1)
    theta = torch.atan2(sin, cos)
    small = sin < 1e-6
    scale = torch.where(small, 1 + theta * theta / 6, theta / torch.where(small, torch.ones_like(sin), sin))
    return v * scale[..., None]


@triton.jit
def _observe(rot, cams, points, cam, pt, uv, focal, m, mask):
    """Residual (r0, r1) and Jacobian rows: J_c rows as [BLOCK, 8], J_p rows as [BLOCK, 4]."""
    c = tl.load(cam + m, mask=mask, other=0)
    p = tl.load(pt + m, mask=mask, other=0)
    X0 = tl.load(points + p * 3, mask=mask, other=0.0)
    X1 = tl.load(points + p * 3 + 1, mask=mask, other=0.0)
    X2 = tl.load(points + p * 3 + 2, mask=mask, other=1.0)
    R = rot + c * 9
    r00 = tl.load(R, mask=mask, other=1.0)
    r01 = tl.load(R + 1, mask=mask, other=0.0)
    r02 = tl.load(R + 2, mask=mask, other=0.0)
    r10 = tl.load(R + 3, mask=mask, other=0.0)
    r11 = tl.load(R + 4, mask=mask, other=1.0)
    r12 = tl.load(R + 5, mask=mask, other=0.0)
    r20 = tl.load(R + 6, mask=mask, other=0.0)
    r21 = tl.load(R + 7, mask=mask, other=0.0)
    r22 = tl.load(R + 8, mask=mask, other=1.0)
    y0 = r00 * X0 + r01 * X1 + r02 * X2
    y1 = r10 * X0 + r11 * X1 + r12 * X2
    y2 = r20 * X0 + r21 * X1 + r22 * X2
    x = y0 + tl.load(cams + c * 6 + 3, mask=mask, other=0.0)
    y = y1 + tl.load(cams + c * 6 + 4, mask=mask, other=0.0)
    z = y2 + tl.load(cams + c * 6 + 5, mask=mask, other=0.0)
    res0 = focal * x / z - tl.load(uv + m * 2, mask=mask, other=0.0)
    res1 = focal * y / z - tl.load(uv + m * 2 + 1, mask=mask, other=0.0)
    inv_z = 1 / z
    d00 = focal * inv_z
    d02 = focal * (-x * inv_z * inv_z)
    d12 = focal * (-y * inv_z * inv_z)
    col = tl.arange(0, 8)[None, :]
    # J_c = dpi [-[y]_x, I]; J_p = dpi R
    jc0 = tl.where(col == 0, (d02 * y1)[:, None], tl.where(col == 1, (d00 * y2 - d02 * y0)[:, None],
          tl.where(col == 2, (-d00 * y1)[:, None], tl.where(col == 3, d00[:, None],
          tl.where(col == 5, d02[:, None], 0.0)))))
    jc1 = tl.where(col == 0, (-d00 * y2 + d12 * y1)[:, None], tl.where(col == 1, (-d12 * y0)[:, None],
          tl.where(col == 2, (d00 * y0)[:, None], tl.where(col == 4, d00[:, None],
          tl.where(col == 5, d12[:, None], 0.0)))))
    k = tl.arange(0, 4)[None, :]
    jp0 = tl.where(k == 0, (d00 * r00 + d02 * r20)[:, None], tl.where(k == 1, (d00 * r01 + d02 * r21)[:, None],
          tl.where(k == 2, (d00 * r02 + d02 * r22)[:, None], 0.0)))
    jp1 = tl.where(k == 0, (d00 * r10 + d12 * r20)[:, None], tl.where(k == 1, (d00 * r11 + d12 * r21)[:, None],
          tl.where(k == 2, (d00 * r12 + d12 * r22)[:, None], 0.0)))
    return c, p, res0, res1, jc0, jc1, jp0, jp1


@triton.jit
def _obs_terms(rot, cams, points, cam, pt, uv, focal, U, V, W, gc, gp, cost, M, BLOCK: tl.constexpr):
    m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = m < M
    c, p, r0, r1, jc0, jc1, jp0, jp1 = _observe(rot, cams, points, cam, pt, uv, focal, m, mask)
    r0, r1 = r0.to(tl.float64), r1.to(tl.float64)
    jc0, jc1, jp0, jp1 = jc0.to(tl.float64), jc1.to(tl.float64), jp0.to(tl.float64), jp1.to(tl.float64)
    row8 = tl.arange(0, 8)[None, :, None]
    col8 = tl.arange(0, 8)[None, None, :]
    col4 = tl.arange(0, 4)[None, None, :]
    row4 = tl.arange(0, 4)[None, :, None]
    m3 = mask[:, None, None]
    uu = jc0[:, :, None] * jc0[:, None, :] + jc1[:, :, None] * jc1[:, None, :]
    tl.atomic_add(U + c[:, None, None] * 36 + row8 * 6 + col8, uu, mask=m3 & (row8 < 6) & (col8 < 6))
    vv = jp0[:, :, None] * jp0[:, None, :] + jp1[:, :, None] * jp1[:, None, :]
    tl.atomic_add(V + p[:, None, None] * 9 + row4 * 3 + col4, vv, mask=m3 & (row4 < 3) & (col4 < 3))
    ww = jc0[:, :, None] * jp0[:, None, :] + jc1[:, :, None] * jp1[:, None, :]
    tl.store(W + m[:, None, None] * 18 + row8 * 3 + col4, ww, mask=m3 & (row8 < 6) & (col4 < 3))
    c8 = tl.arange(0, 8)[None, :]
    c4 = tl.arange(0, 4)[None, :]
    tl.atomic_add(gc + c[:, None] * 6 + c8, jc0 * r0[:, None] + jc1 * r1[:, None], mask=mask[:, None] & (c8 < 6))
    tl.atomic_add(gp + p[:, None] * 3 + c4, jp0 * r0[:, None] + jp1 * r1[:, None], mask=mask[:, None] & (c4 < 3))
    tl.atomic_add(cost, tl.sum(tl.where(mask, 0.5 * (r0 * r0 + r1 * r1), 0.0), axis=0))


@triton.jit
def _cost(rot, cams, points, cam, pt, uv, focal, cost, M, BLOCK: tl.constexpr):
    m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = m < M
    c, p, r0, r1, jc0, jc1, jp0, jp1 = _observe(rot, cams, points, cam, pt, uv, focal, m, mask)
    r0, r1 = r0.to(tl.float64), r1.to(tl.float64)
    tl.atomic_add(cost, tl.sum(tl.where(mask, 0.5 * (r0 * r0 + r1 * r1), 0.0), axis=0))


@triton.jit
def _point_inverse(V, gp, mu, Vinv, y, P, BLOCK: tl.constexpr):
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < P
    base = V + p * 9
    a = tl.load(base, mask=mask, other=1.0) + mu
    b = tl.load(base + 1, mask=mask, other=0.0)
    c = tl.load(base + 2, mask=mask, other=0.0)
    d = tl.load(base + 3, mask=mask, other=0.0)
    e = tl.load(base + 4, mask=mask, other=1.0) + mu
    f = tl.load(base + 5, mask=mask, other=0.0)
    g = tl.load(base + 6, mask=mask, other=0.0)
    h = tl.load(base + 7, mask=mask, other=0.0)
    k = tl.load(base + 8, mask=mask, other=1.0) + mu
    i00, i01, i02 = e * k - f * h, c * h - b * k, b * f - c * e
    i10, i11, i12 = f * g - d * k, a * k - c * g, c * d - a * f
    i20, i21, i22 = d * h - e * g, b * g - a * h, a * e - b * d
    s = 1 / (a * i00 + b * i10 + c * i20)
    out = Vinv + p * 9
    tl.store(out, i00 * s, mask=mask)
    tl.store(out + 1, i01 * s, mask=mask)
    tl.store(out + 2, i02 * s, mask=mask)
    tl.store(out + 3, i10 * s, mask=mask)
    tl.store(out + 4, i11 * s, mask=mask)
    tl.store(out + 5, i12 * s, mask=mask)
    tl.store(out + 6, i20 * s, mask=mask)
    tl.store(out + 7, i21 * s, mask=mask)
    tl.store(out + 8, i22 * s, mask=mask)
    g0 = tl.load(gp + p * 3, mask=mask, other=0.0)
    g1 = tl.load(gp + p * 3 + 1, mask=mask, other=0.0)
    g2 = tl.load(gp + p * 3 + 2, mask=mask, other=0.0)
    tl.store(y + p * 3, (i00 * g0 + i01 * g1 + i02 * g2) * s, mask=mask)
    tl.store(y + p * 3 + 1, (i10 * g0 + i11 * g1 + i12 * g2) * s, mask=mask)
    tl.store(y + p * 3 + 2, (i20 * g0 + i21 * g1 + i22 * g2) * s, mask=mask)


@triton.jit
def _column(t, k: tl.constexpr):
    """t[:, :, k] of a [BLOCK, R, 4] tensor."""
    return tl.sum(tl.where(tl.arange(0, 4)[None, None, :] == k, t, 0.0), axis=2)


@triton.jit
def _pairs_into_S(W, Vinv, pairs, cam, pt, S, Q, C, BLOCK: tl.constexpr):
    q = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = q < Q
    m1 = tl.load(pairs + q * 2, mask=mask, other=0)
    m2 = tl.load(pairs + q * 2 + 1, mask=mask, other=0)
    p = tl.load(pt + m1, mask=mask, other=0)
    c1 = tl.load(cam + m1, mask=mask, other=0)
    c2 = tl.load(cam + m2, mask=mask, other=0)
    row8 = tl.arange(0, 8)[None, :, None]
    col4 = tl.arange(0, 4)[None, None, :]
    row4 = tl.arange(0, 4)[None, :, None]
    m3 = mask[:, None, None]
    w1 = tl.load(W + m1[:, None, None] * 18 + row8 * 3 + col4, mask=m3 & (row8 < 6) & (col4 < 3), other=0.0)
    w2 = tl.load(W + m2[:, None, None] * 18 + row8 * 3 + col4, mask=m3 & (row8 < 6) & (col4 < 3), other=0.0)
    vi = tl.load(Vinv + p[:, None, None] * 9 + row4 * 3 + col4, mask=m3 & (row4 < 3) & (col4 < 3), other=0.0)
    # T = W1 V^-1 [BLOCK, 8, 4], then block = T W2^T [BLOCK, 8, 8]
    t = (_column(w1, 0)[:, :, None] * tl.sum(tl.where(row4 == 0, vi, 0.0), axis=1)[:, None, :]
         + _column(w1, 1)[:, :, None] * tl.sum(tl.where(row4 == 1, vi, 0.0), axis=1)[:, None, :]
         + _column(w1, 2)[:, :, None] * tl.sum(tl.where(row4 == 2, vi, 0.0), axis=1)[:, None, :])
    block = (_column(t, 0)[:, :, None] * _column(w2, 0)[:, None, :]
             + _column(t, 1)[:, :, None] * _column(w2, 1)[:, None, :]
             + _column(t, 2)[:, :, None] * _column(w2, 2)[:, None, :])
    col8 = tl.arange(0, 8)[None, None, :]
    target = S + (c1[:, None, None] * 6 + row8) * (6 * C) + c2[:, None, None] * 6 + col8
    tl.atomic_add(target, -block, mask=m3 & (row8 < 6) & (col8 < 6))


@triton.jit
def _obs_rhs_and_back(W, y, dc, cam, pt, rhs, back, M, WITH_DC: tl.constexpr, BLOCK: tl.constexpr):
    """WITH_DC = False: rhs[cam] += W_m y_p; True: back[pt] += W_m^T dc[cam]."""
    m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = m < M
    c = tl.load(cam + m, mask=mask, other=0)
    p = tl.load(pt + m, mask=mask, other=0)
    row8 = tl.arange(0, 8)[None, :, None]
    col4 = tl.arange(0, 4)[None, None, :]
    m3 = mask[:, None, None]
    w = tl.load(W + m[:, None, None] * 18 + row8 * 3 + col4, mask=m3 & (row8 < 6) & (col4 < 3), other=0.0)
    if WITH_DC:
        d = tl.load(dc + c[:, None, None] * 6 + row8, mask=m3 & (row8 < 6), other=0.0)
        c4 = tl.arange(0, 4)[None, :]
        tl.atomic_add(back + p[:, None] * 3 + c4, tl.sum(w * d, axis=1), mask=mask[:, None] & (c4 < 3))
    else:
        yy = tl.load(y + p[:, None, None] * 3 + col4, mask=m3 & (col4 < 3), other=0.0)
        c8 = tl.arange(0, 8)[None, :]
        tl.atomic_add(rhs + c[:, None] * 6 + c8, tl.sum(w * yy, axis=2), mask=mask[:, None] & (c8 < 6))


@triton.jit
def _point_update(points, Vinv, gp, back, out, P, BLOCK: tl.constexpr):
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < P
    b0 = -tl.load(gp + p * 3, mask=mask, other=0.0) - tl.load(back + p * 3, mask=mask, other=0.0)
    b1 = -tl.load(gp + p * 3 + 1, mask=mask, other=0.0) - tl.load(back + p * 3 + 1, mask=mask, other=0.0)
    b2 = -tl.load(gp + p * 3 + 2, mask=mask, other=0.0) - tl.load(back + p * 3 + 2, mask=mask, other=0.0)
    for r in tl.static_range(3):
        v = Vinv + p * 9 + r * 3
        dp = (tl.load(v, mask=mask, other=0.0) * b0 + tl.load(v + 1, mask=mask, other=0.0) * b1
              + tl.load(v + 2, mask=mask, other=0.0) * b2)
        x = tl.load(points + p * 3 + r, mask=mask, other=0.0).to(tl.float64)
        tl.store(out + p * 3 + r, (x + dp).to(out.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, cameras, focal, points, cam, pt, uv, pairs, mu):
        C, P, M, Q = cameras.shape[0], points.shape[0], cam.shape[0], pairs.shape[0]
        dev, f64 = cameras.device, torch.float64
        cameras, points, uv = cameras.contiguous(), points.contiguous(), uv.contiguous()
        cam, pt, pairs = cam.contiguous(), pt.contiguous(), pairs.contiguous()
        f = float(focal)
        rot = so3_exp(cameras[:, :3]).contiguous()
        U = torch.zeros(C, 6, 6, dtype=f64, device=dev)
        V = torch.zeros(P, 3, 3, dtype=f64, device=dev)
        W = torch.empty(M, 6, 3, dtype=f64, device=dev)
        gc = torch.zeros(C, 6, dtype=f64, device=dev)
        gp = torch.zeros(P, 3, dtype=f64, device=dev)
        cost = torch.zeros(2, dtype=f64, device=dev)
        BLOCK = 256
        _obs_terms[(triton.cdiv(M, BLOCK),)](rot, cameras, points, cam, pt, uv, f, U, V, W, gc, gp, cost, M, BLOCK=BLOCK)
        Vinv = torch.empty(P, 3, 3, dtype=f64, device=dev)
        y = torch.empty(P, 3, dtype=f64, device=dev)
        mu64 = float(mu)
        _point_inverse[(triton.cdiv(P, BLOCK),)](V, gp, mu64, Vinv, y, P, BLOCK=BLOCK)
        S = torch.zeros(6 * C, 6 * C, dtype=f64, device=dev)
        _pairs_into_S[(triton.cdiv(Q, BLOCK),)](W, Vinv, pairs, cam, pt, S, Q, C, BLOCK=BLOCK)
        S = S + torch.block_diag(*(U + mu64 * torch.eye(6, dtype=f64, device=dev)))
        rhs = -gc
        _obs_rhs_and_back[(triton.cdiv(M, BLOCK),)](W, y, gc, cam, pt, rhs, gp, M, WITH_DC=False, BLOCK=BLOCK)
        dc = torch.cholesky_solve(rhs.reshape(-1, 1), torch.linalg.cholesky(S)).reshape(C, 6).contiguous()
        back = torch.zeros(P, 3, dtype=f64, device=dev)
        _obs_rhs_and_back[(triton.cdiv(M, BLOCK),)](W, y, dc, cam, pt, rhs, back, M, WITH_DC=True, BLOCK=BLOCK)
        new_points = torch.empty_like(points)
        _point_update[(triton.cdiv(P, BLOCK),)](points, Vinv, gp, back, new_points, P, BLOCK=BLOCK)
        R_new = so3_exp(dc[:, :3]) @ so3_exp(cameras[:, :3].to(f64))
        new_cameras = torch.cat([so3_log(R_new), cameras[:, 3:].to(f64) + dc[:, 3:]], -1).to(cameras.dtype).contiguous()
        rot_new = so3_exp(new_cameras[:, :3]).contiguous()
        _cost[(triton.cdiv(M, BLOCK),)](rot_new, new_cameras, new_points, cam, pt, uv, f, cost[1:], M, BLOCK=BLOCK)
        return new_cameras, new_points, cost.to(cameras.dtype)
