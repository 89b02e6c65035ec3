"""Oracle for robotics/l1/imu_preintegration: one lane per window, state in registers.

Delta_R (9), Delta_v and Delta_p stay in registers over all T samples; each step reads six
floats per window and applies Rodrigues with one sin/cos; only the final state is written.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _preintegrate(gyro, accel, bias, dt_ptr, R_out, v_out, p_out, B, T, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = rows < B
    one = tl.full([BLOCK], 1.0, tl.float32)
    zero = tl.zeros([BLOCK], tl.float32)
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = one, zero, zero, zero, one, zero, zero, zero, one
    v0, v1, v2, p0, p1, p2 = zero, zero, zero, zero, zero, zero
    bg0 = tl.load(bias + rows * 6, mask=m, other=0.0)
    bg1 = tl.load(bias + rows * 6 + 1, mask=m, other=0.0)
    bg2 = tl.load(bias + rows * 6 + 2, mask=m, other=0.0)
    ba0 = tl.load(bias + rows * 6 + 3, mask=m, other=0.0)
    ba1 = tl.load(bias + rows * 6 + 4, mask=m, other=0.0)
    ba2 = tl.load(bias + rows * 6 + 5, mask=m, other=0.0)
    dt = tl.load(dt_ptr)
    for k in range(T):
        base = (rows * T + k) * 3
        a0 = tl.load(accel + base, mask=m, other=0.0) - ba0
        a1 = tl.load(accel + base + 1, mask=m, other=0.0) - ba1
        a2 = tl.load(accel + base + 2, mask=m, other=0.0) - ba2
        w0 = (tl.load(gyro + base, mask=m, other=0.0) - bg0) * dt
        w1 = (tl.load(gyro + base + 1, mask=m, other=0.0) - bg1) * dt
        w2 = (tl.load(gyro + base + 2, mask=m, other=0.0) - bg2) * dt
        ra0 = r00 * a0 + r01 * a1 + r02 * a2
        ra1 = r10 * a0 + r11 * a1 + r12 * a2
        ra2 = r20 * a0 + r21 * a1 + r22 * a2
        p0 += v0 * dt + 0.5 * ra0 * dt * dt
        p1 += v1 * dt + 0.5 * ra1 * dt * dt
        p2 += v2 * dt + 0.5 * ra2 * dt * dt
        v0 += ra0 * dt
        v1 += ra1 * dt
        v2 += ra2 * dt
        # Exp(phi) = I + a K + b K^2, K = [phi]x
        theta = tl.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
        small = theta < 1e-6
        safe = tl.where(small, 1.0, theta)
        ca = tl.where(small, 1.0, tl.sin(safe) / safe)
        cb = tl.where(small, 0.5, (1.0 - tl.cos(safe)) / (safe * safe))
        e00 = 1.0 - cb * (w1 * w1 + w2 * w2)
        e11 = 1.0 - cb * (w0 * w0 + w2 * w2)
        e22 = 1.0 - cb * (w0 * w0 + w1 * w1)
        e01, e10 = cb * w0 * w1 - ca * w2, cb * w0 * w1 + ca * w2
        e02, e20 = cb * w0 * w2 + ca * w1, cb * w0 * w2 - ca * w1
        e12, e21 = cb * w1 * w2 - ca * w0, cb * w1 * w2 + ca * w0
        r00, r01, r02 = r00 * e00 + r01 * e10 + r02 * e20, r00 * e01 + r01 * e11 + r02 * e21, r00 * e02 + r01 * e12 + r02 * e22
        r10, r11, r12 = r10 * e00 + r11 * e10 + r12 * e20, r10 * e01 + r11 * e11 + r12 * e21, r10 * e02 + r11 * e12 + r12 * e22
        r20, r21, r22 = r20 * e00 + r21 * e10 + r22 * e20, r20 * e01 + r21 * e11 + r22 * e21, r20 * e02 + r21 * e12 + r22 * e22
    R = R_out + rows * 9
    tl.store(R, r00, mask=m)
    tl.store(R + 1, r01, mask=m)
    tl.store(R + 2, r02, mask=m)
    tl.store(R + 3, r10, mask=m)
    tl.store(R + 4, r11, mask=m)
    tl.store(R + 5, r12, mask=m)
    tl.store(R + 6, r20, mask=m)
    tl.store(R + 7, r21, mask=m)
    tl.store(R + 8, r22, mask=m)
    tl.store(v_out + rows * 3, v0, mask=m)
    tl.store(v_out + rows * 3 + 1, v1, mask=m)
    tl.store(v_out + rows * 3 + 2, v2, mask=m)
    tl.store(p_out + rows * 3, p0, mask=m)
    tl.store(p_out + rows * 3 + 1, p1, mask=m)
    tl.store(p_out + rows * 3 + 2, p2, mask=m)


class ModelNew(nn.Module):
    def forward(self, gyro, accel, bias, dt):
        B, T, _ = gyro.shape
        dev = gyro.device
        R = torch.empty(B, 3, 3, device=dev, dtype=torch.float32)
        v = torch.empty(B, 3, device=dev, dtype=torch.float32)
        p = torch.empty(B, 3, device=dev, dtype=torch.float32)
        BLOCK = 128 if gyro.is_cuda else 1024
        if B:
            _preintegrate[(triton.cdiv(B, BLOCK),)](gyro.float().contiguous(), accel.float().contiguous(),
                                                    bias.float().contiguous(), dt.float().reshape(1), R, v, p,
                                                    B, T, BLOCK=BLOCK)
        return R, v, p
