"""Oracle for robotics/l3/chomp_trajectory_optimization: three Triton kernels per iteration.

1. one lane per waypoint: forward kinematics of the 7-joint chain, writing each joint frame
   (rotation, origin, world axis);
2. a [waypoints x spheres] tile per program: sphere centres at t-1, t, t+1 from those frames,
   the speed, the trilinear SDF value and gradient-field sample, the hinge, and J^T grad summed
   over the spheres in registers (the Jacobian is never materialized);
3. one lane per (trajectory, joint): the Thomas algorithm for A = tridiag(-1, 2, -1) / dt^2 and
   the update of the interior waypoints.
The gradient field (torch.gradient, once per call) and the per-trajectory cost sums are torch glue.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = tl.constexpr(0.05)


@triton.jit
def _fk(xi, R_f, p_f, axis, frames, NC, BLOCK: tl.constexpr):
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cm = c < NC
    zero = tl.zeros([BLOCK], tl.float32)
    r00, r01, r02 = zero + 1.0, zero, zero
    r10, r11, r12 = zero, zero + 1.0, zero
    r20, r21, r22 = zero, zero, zero + 1.0
    px, py, pz = zero, zero, zero
    for j in tl.static_range(7):
        fx, fy, fz = tl.load(p_f + j * 3), tl.load(p_f + j * 3 + 1), tl.load(p_f + j * 3 + 2)
        px, py, pz = (px + r00 * fx + r01 * fy + r02 * fz, py + r10 * fx + r11 * fy + r12 * fz,
                      pz + r20 * fx + r21 * fy + r22 * fz)
        F = R_f + j * 9
        f00, f01, f02 = tl.load(F), tl.load(F + 1), tl.load(F + 2)
        f10, f11, f12 = tl.load(F + 3), tl.load(F + 4), tl.load(F + 5)
        f20, f21, f22 = tl.load(F + 6), tl.load(F + 7), tl.load(F + 8)
        m00, m01, m02 = r00 * f00 + r01 * f10 + r02 * f20, r00 * f01 + r01 * f11 + r02 * f21, r00 * f02 + r01 * f12 + r02 * f22
        m10, m11, m12 = r10 * f00 + r11 * f10 + r12 * f20, r10 * f01 + r11 * f11 + r12 * f21, r10 * f02 + r11 * f12 + r12 * f22
        m20, m21, m22 = r20 * f00 + r21 * f10 + r22 * f20, r20 * f01 + r21 * f11 + r22 * f21, r20 * f02 + r21 * f12 + r22 * f22
        # Rodrigues: I + s K + (1 - c) K^2 about the unit axis (ax, ay, az)
        ax, ay, az = tl.load(axis + j * 3), tl.load(axis + j * 3 + 1), tl.load(axis + j * 3 + 2)
        q = tl.load(xi + c * 7 + j, mask=cm, other=0.0)
        s = tl.sin(q)
        v = 1 - tl.cos(q)
        k00, k11, k22 = -(ay * ay + az * az), -(ax * ax + az * az), -(ax * ax + ay * ay)
        k01, k02, k12 = ax * ay, ax * az, ay * az
        e00, e01, e02 = 1 + v * k00, -s * az + v * k01, s * ay + v * k02
        e10, e11, e12 = s * az + v * k01, 1 + v * k11, -s * ax + v * k12
        e20, e21, e22 = -s * ay + v * k02, s * ax + v * k12, 1 + v * k22
        r00, r01, r02 = m00 * e00 + m01 * e10 + m02 * e20, m00 * e01 + m01 * e11 + m02 * e21, m00 * e02 + m01 * e12 + m02 * e22
        r10, r11, r12 = m10 * e00 + m11 * e10 + m12 * e20, m10 * e01 + m11 * e11 + m12 * e21, m10 * e02 + m11 * e12 + m12 * e22
        r20, r21, r22 = m20 * e00 + m21 * e10 + m22 * e20, m20 * e01 + m21 * e11 + m22 * e21, m20 * e02 + m21 * e12 + m22 * e22
        out = frames + (c * 7 + j) * 16
        tl.store(out + 0, r00, mask=cm)
        tl.store(out + 1, r01, mask=cm)
        tl.store(out + 2, r02, mask=cm)
        tl.store(out + 3, r10, mask=cm)
        tl.store(out + 4, r11, mask=cm)
        tl.store(out + 5, r12, mask=cm)
        tl.store(out + 6, r20, mask=cm)
        tl.store(out + 7, r21, mask=cm)
        tl.store(out + 8, r22, mask=cm)
        tl.store(out + 9, px, mask=cm)
        tl.store(out + 10, py, mask=cm)
        tl.store(out + 11, pz, mask=cm)
        tl.store(out + 12, r00 * ax + r01 * ay + r02 * az, mask=cm)
        tl.store(out + 13, r10 * ax + r11 * ay + r12 * az, mask=cm)
        tl.store(out + 14, r20 * ax + r21 * ay + r22 * az, mask=cm)


@triton.jit
def _centre(frames, c, link, ox, oy, oz, mask):
    f = frames + (c * 7 + link) * 16
    x = tl.load(f + 9, mask=mask, other=0.0) + tl.load(f, mask=mask, other=0.0) * ox \
        + tl.load(f + 1, mask=mask, other=0.0) * oy + tl.load(f + 2, mask=mask, other=0.0) * oz
    y = tl.load(f + 10, mask=mask, other=0.0) + tl.load(f + 3, mask=mask, other=0.0) * ox \
        + tl.load(f + 4, mask=mask, other=0.0) * oy + tl.load(f + 5, mask=mask, other=0.0) * oz
    z = tl.load(f + 11, mask=mask, other=0.0) + tl.load(f + 6, mask=mask, other=0.0) * ox \
        + tl.load(f + 7, mask=mask, other=0.0) * oy + tl.load(f + 8, mask=mask, other=0.0) * oz
    return x, y, z


@triton.jit
def _obstacle(frames, field, origin, voxel, sphere_link, sphere_offset, radius, grad_obs, obs_cost,
              B, T, S, D, H, W, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    n_int = T - 2
    ci = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)          # interior waypoint index
    cm = ci < B * n_int
    b = ci // n_int
    t = ci % n_int + 1
    c = b * T + t
    s = tl.arange(0, BLOCK_S)
    sm = s < S
    m2 = cm[:, None] & sm[None, :]
    link = tl.load(sphere_link + s, mask=sm, other=0)[None, :]
    ox = tl.load(sphere_offset + s * 3, mask=sm, other=0.0)[None, :]
    oy = tl.load(sphere_offset + s * 3 + 1, mask=sm, other=0.0)[None, :]
    oz = tl.load(sphere_offset + s * 3 + 2, mask=sm, other=0.0)[None, :]
    x, y, z = _centre(frames, c[:, None], link, ox, oy, oz, m2)
    xa, ya, za = _centre(frames, c[:, None] + 1, link, ox, oy, oz, m2)
    xb, yb, zb = _centre(frames, c[:, None] - 1, link, ox, oy, oz, m2)
    vx, vy, vz = (xa - xb) / 2, (ya - yb) / 2, (za - zb) / 2
    speed = tl.sqrt(vx * vx + vy * vy + vz * vz)
    # cell and fractions as robotics/l1/sdf_sphere_collision_cost
    gx = (x - tl.load(origin)) / voxel
    gy = (y - tl.load(origin + 1)) / voxel
    gz = (z - tl.load(origin + 2)) / voxel
    cx = tl.minimum(tl.maximum(gx, 0.0), W - 1.0)
    cy = tl.minimum(tl.maximum(gy, 0.0), H - 1.0)
    cz = tl.minimum(tl.maximum(gz, 0.0), D - 1.0)
    ix = tl.minimum(tl.floor(cx), W - 2.0)
    iy = tl.minimum(tl.floor(cy), H - 2.0)
    iz = tl.minimum(tl.floor(cz), D - 2.0)
    fx, fy, fz = cx - ix, cy - iy, cz - iz
    base = ((iz.to(tl.int32) * H + iy.to(tl.int32)) * W + ix.to(tl.int32))
    ch = tl.arange(0, 4)[None, None, :]
    m3 = m2[:, :, None]
    fx3, fy3, fz3 = fx[:, :, None], fy[:, :, None], fz[:, :, None]
    v000 = tl.load(field + base[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v100 = tl.load(field + (base + 1)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v010 = tl.load(field + (base + W)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v110 = tl.load(field + (base + W + 1)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v001 = tl.load(field + (base + H * W)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v101 = tl.load(field + (base + H * W + 1)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v011 = tl.load(field + (base + H * W + W)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    v111 = tl.load(field + (base + H * W + W + 1)[:, :, None] * 4 + ch, mask=m3, other=0.0)
    c00 = v000 + fx3 * (v100 - v000)
    c10 = v010 + fx3 * (v110 - v010)
    c01 = v001 + fx3 * (v101 - v001)
    c11 = v011 + fx3 * (v111 - v011)
    c0 = c00 + fy3 * (c10 - c00)
    c1 = c01 + fy3 * (c11 - c01)
    sample = c0 + fz3 * (c1 - c0)                                   # [C, S, 4]: value, d/dx, d/dy, d/dz
    value = tl.sum(tl.where(ch == 0, sample, 0.0), axis=2)
    dsx = tl.sum(tl.where(ch == 1, sample, 0.0), axis=2)
    dsy = tl.sum(tl.where(ch == 2, sample, 0.0), axis=2)
    dsz = tl.sum(tl.where(ch == 3, sample, 0.0), axis=2)
    dsx = tl.where((gx >= 0) & (gx <= W - 1.0), dsx, 0.0)
    dsy = tl.where((gy >= 0) & (gy <= H - 1.0), dsy, 0.0)
    dsz = tl.where((gz >= 0) & (gz <= D - 1.0), dsz, 0.0)
    d = value - tl.load(radius + s, mask=sm, other=0.0)[None, :]
    cost = tl.where(d < 0, -d + EPS / 2, tl.where(d <= EPS, (d - EPS) * (d - EPS) / (2 * EPS), 0.0))
    slope = tl.where(d < 0, -1.0, tl.where(d <= EPS, (d - EPS) / EPS, 0.0))
    scale = tl.where(m2, slope * speed, 0.0)
    wx, wy, wz = scale * dsx, scale * dsy, scale * dsz
    tl.store(obs_cost + ci, tl.sum(tl.where(m2, cost * speed, 0.0), axis=1), mask=cm)
    for k in tl.static_range(7):                                     # J_s^T (grad c speed), summed over spheres
        f = frames + (c[:, None] * 7 + k) * 16
        ax = tl.load(f + 12, mask=m2, other=0.0)
        ay = tl.load(f + 13, mask=m2, other=0.0)
        az = tl.load(f + 14, mask=m2, other=0.0)
        lx = x - tl.load(f + 9, mask=m2, other=0.0)
        ly = y - tl.load(f + 10, mask=m2, other=0.0)
        lz = z - tl.load(f + 11, mask=m2, other=0.0)
        term = (ay * lz - az * ly) * wx + (az * lx - ax * lz) * wy + (ax * ly - ay * lx) * wz
        term = tl.where(link >= k, term, 0.0)
        tl.store(grad_obs + ci * 7 + k, tl.sum(term, axis=1), mask=cm)


@triton.jit
def _thomas_update(xi, grad_obs, scratch, xi_out, w_obs, step, B, T, BLOCK: tl.constexpr):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)             # (trajectory, joint)
    lm = lane < B * 7
    b = lane // 7
    j = lane % 7
    n = T - 2
    s2 = (T - 1.0) * (T - 1.0)
    row = xi + b * T * 7 + j
    prev = tl.load(row, mask=lm, other=0.0)
    cur = tl.load(row + 7, mask=lm, other=0.0)
    c_prime = tl.zeros([BLOCK], tl.float32)
    d_prime = tl.zeros([BLOCK], tl.float32)
    for i in range(n):                                                # forward sweep
        nxt = tl.load(row + (i + 2) * 7, mask=lm, other=0.0)
        rhs = (2 * cur - prev - nxt) * s2 + w_obs * tl.load(grad_obs + (b * n + i) * 7 + j, mask=lm, other=0.0)
        denom = 2 * s2 + s2 * c_prime                                 # b_i - a_i c'_{i-1}, a = c = -s2
        c_prime = -s2 / denom
        d_prime = (rhs + s2 * d_prime) / denom
        tl.store(scratch + (lane * n + i) * 2, c_prime, mask=lm)
        tl.store(scratch + (lane * n + i) * 2 + 1, d_prime, mask=lm)
        prev = cur
        cur = nxt
    out = xi_out + b * T * 7 + j
    tl.store(out, tl.load(row, mask=lm, other=0.0), mask=lm)
    tl.store(out + (T - 1) * 7, tl.load(row + (T - 1) * 7, mask=lm, other=0.0), mask=lm)
    u = tl.zeros([BLOCK], tl.float32)
    for ii in range(n):                                               # back substitution and update
        i = n - 1 - ii
        u = tl.load(scratch + (lane * n + i) * 2 + 1, mask=lm, other=0.0) \
            - tl.load(scratch + (lane * n + i) * 2, mask=lm, other=0.0) * u
        tl.store(out + (i + 1) * 7, tl.load(row + (i + 1) * 7, mask=lm, other=0.0) - step * u, mask=lm)


class ModelNew(nn.Module):
    def __init__(self, R_f, p_f, axis, sphere_link, sphere_offset, sphere_radius, step: float, w_obs: float, iters: int):
        super().__init__()
        self.register_buffer("R_f", R_f)
        self.register_buffer("p_f", p_f)
        self.register_buffer("axis", axis)
        self.register_buffer("sphere_link", sphere_link)
        self.register_buffer("sphere_offset", sphere_offset)
        self.register_buffer("sphere_radius", sphere_radius)
        self.step, self.w_obs, self.iters = step, w_obs, iters

    def forward(self, xi, sdf, origin, voxel):
        B, T, J = xi.shape
        S = self.sphere_radius.shape[0]
        D, H, W = sdf.shape
        dev = xi.device
        h = float(voxel)
        gz, gy, gx = torch.gradient(sdf, spacing=h, dim=(0, 1, 2))
        field = torch.stack([sdf, gx, gy, gz], -1).contiguous()
        chain = [t.contiguous() for t in (self.R_f, self.p_f, self.axis)]
        spheres = [t.contiguous() for t in (self.sphere_link, self.sphere_offset, self.sphere_radius)]
        frames = torch.empty(B * T * 7 * 16, dtype=xi.dtype, device=dev)
        grad_obs = torch.empty(B * (T - 2) * 7, dtype=xi.dtype, device=dev)
        obs_cost = torch.empty(B * (T - 2), dtype=xi.dtype, device=dev)
        scratch = torch.empty(B * 7 * (T - 2) * 2, dtype=xi.dtype, device=dev)
        xi = xi.contiguous()
        BLOCK_S = triton.next_power_of_2(S)
        BLOCK_C = max(1, 1024 // BLOCK_S)
        costs = []
        for _ in range(self.iters):
            _fk[(triton.cdiv(B * T, 128),)](xi, *chain, frames, B * T, BLOCK=128)
            _obstacle[(triton.cdiv(B * (T - 2), BLOCK_C),)](frames, field, origin, h, *spheres, grad_obs, obs_cost,
                                                              B, T, S, D, H, W, BLOCK_C=BLOCK_C, BLOCK_S=BLOCK_S)
            smooth = 0.5 * ((xi[:, 1:] - xi[:, :-1]) * (T - 1)).square().sum((1, 2))
            costs.append(smooth + self.w_obs * obs_cost.view(B, T - 2).sum(1))
            new_xi = torch.empty_like(xi)
            _thomas_update[(triton.cdiv(B * 7, 64),)](xi, grad_obs, scratch, new_xi, float(self.w_obs),
                                                     float(self.step), B, T, BLOCK=64)
            xi = new_xi
        return xi, torch.stack(costs)
