"""Oracle for robotics/l1/lidar_range_image_projection: packed 64-bit atomic-min z-buffer.

Pass 1 (a lane per point) finds the pixel without atan2/asin: the column is the number of
yaw boundaries at or above the point's yaw, counted by binary search on a float64 table of
a monotone pseudo-angle, and the row likewise on sin(pitch) boundaries against z / r. The
float32 range's bits (positive floats order like integers) go in the high word and the point
index in the low word, so one 64-bit atomic min keeps the closest point, ties to the lowest
index. Pass 2 (a lane per pixel) unpacks the winner and gathers its range and channels.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

FOV_UP_DEG, FOV_DOWN_DEG = 3.0, -25.0
EMPTY = 0x7FFFFFFFFFFFFFFF


@triton.jit
def _pseudo_angle(x, y):
    """Strictly increasing in atan2(y, x) over (-pi, pi], values in (-2, 2]."""
    t = 1.0 - x / (tl.abs(x) + tl.abs(y))
    return tl.where(y >= 0, t, -t)


@triton.jit
def _count_at_or_above(value, table_ptr, n, LOG: tl.constexpr):
    """Number of k in 1..n with value <= table[k] (table decreasing), by binary search."""
    count = tl.zeros(value.shape, tl.int32)
    for it in tl.static_range(LOG):
        step = 1 << (LOG - 1 - it)
        probe = count + step
        ok = probe <= n
        bound = tl.load(table_ptr + tl.where(ok, probe, 0), mask=ok, other=0.0)
        count = tl.where(ok & (value <= bound), probe, count)
    return count


@triton.jit
def _project_kernel(points_ptr, n_valid_ptr, zbuf_ptr, yaw_table, pitch_table, N, H, W, total,
                    BLOCK: tl.constexpr, LOG_W: tl.constexpr, LOG_H: tl.constexpr):
    gid = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    b = gid // N
    i = gid % N
    n_valid = tl.load(n_valid_ptr + b, mask=gid < total, other=0)
    mask = (gid < total) & (i < n_valid)
    base = points_ptr + gid.to(tl.int64) * 4
    x = tl.load(base + 0, mask=mask, other=1.0).to(tl.float64)
    y = tl.load(base + 1, mask=mask, other=0.0).to(tl.float64)
    z = tl.load(base + 2, mask=mask, other=0.0).to(tl.float64)
    r = tl.sqrt(x * x + y * y + z * z)
    u = _count_at_or_above(_pseudo_angle(x, y), yaw_table, W - 1, LOG_W).to(tl.int64)
    v = _count_at_or_above(z / r, pitch_table, H - 1, LOG_H).to(tl.int64)
    key = r.to(tl.float32).to(tl.int32, bitcast=True).to(tl.int64)
    packed = (key << 32) | i.to(tl.int64)
    tl.atomic_min(zbuf_ptr + (b.to(tl.int64) * H + v) * W + u, packed, mask=mask)


@triton.jit
def _gather_kernel(zbuf_ptr, points_ptr, range_ptr, index_ptr, channels_ptr, N, HW, pixels,
                   BLOCK: tl.constexpr):
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = pix < pixels
    packed = tl.load(zbuf_ptr + pix, mask=mask, other=0)
    empty = packed == 0x7FFFFFFFFFFFFFFF
    idx = packed & 0x7FFFFFFF                   # point indices stay below 2^31
    rng = (packed >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    b = pix // HW
    s = pix % HW
    tl.store(range_ptr + pix, tl.where(empty, -1.0, rng), mask=mask)
    tl.store(index_ptr + pix, tl.where(empty, -1, idx), mask=mask)
    src = points_ptr + (b * N + tl.where(empty, 0, idx)) * 4
    out = channels_ptr + b * 4 * HW + s
    for c in range(4):
        val = tl.load(src + c, mask=mask & ~empty, other=0.0)
        tl.store(out + c * HW, val, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, height: int, width: int):
        super().__init__()
        self.height, self.width = height, width
        # column k starts where yaw = pi (1 - 2k / W); row k where pitch = fov_down + fov (1 - k / H)
        yaw = math.pi * (1 - 2 * torch.arange(width + 1, dtype=torch.float64) / width)
        x, y = yaw.cos(), yaw.sin()
        t = 1 - x / (x.abs() + y.abs())
        self.register_buffer("yaw_table", torch.where(y >= 0, t, -t))
        fov_down = math.radians(FOV_DOWN_DEG)
        fov = math.radians(FOV_UP_DEG) - fov_down
        pitch = fov_down + fov * (1 - torch.arange(height + 1, dtype=torch.float64) / height)
        self.register_buffer("pitch_table", pitch.sin())

    def forward(self, points, n_valid):
        B, N, C = points.shape
        H, W = self.height, self.width
        points = points.float().contiguous()
        dev = points.device
        pixels = B * H * W
        zbuf = torch.full((pixels,), EMPTY, dtype=torch.int64, device=dev)
        rng = torch.empty(B, H, W, dtype=torch.float32, device=dev)
        index = torch.empty(B, H, W, dtype=torch.int64, device=dev)
        channels = torch.empty(B, C, H, W, dtype=torch.float32, device=dev)
        BLOCK = 256 if points.is_cuda else 8192
        total = B * N
        if total:
            _project_kernel[(triton.cdiv(total, BLOCK),)](
                points, n_valid.contiguous(), zbuf, self.yaw_table.to(dev), self.pitch_table.to(dev), N, H, W, total,
                BLOCK=BLOCK, LOG_W=max(W - 1, 1).bit_length(), LOG_H=max(H - 1, 1).bit_length())
        if pixels:
            _gather_kernel[(triton.cdiv(pixels, BLOCK),)](zbuf, points, rng, index, channels, N, H * W, pixels,
                                                          BLOCK=BLOCK)
        return rng, index, channels
