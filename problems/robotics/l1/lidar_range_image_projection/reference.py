"""robotics/l1/lidar_range_image_projection: spherical projection of LiDAR points with a z-buffer.

RangeNet++-style range image: each point goes to the pixel of its yaw (column) and pitch
(row), computed in float64; each pixel keeps its closest point (smallest float32 range,
ties to the lowest point index) and gathers that point's four channels.
"""
import math

import torch
import torch.nn as nn

FOV_UP_DEG, FOV_DOWN_DEG = 3.0, -25.0


def project(points: torch.Tensor, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel row v and column u (int64) of every point, from float64 yaw and pitch."""
    p = points[..., :3].double()
    x, y, z = p.unbind(-1)
    r = (x * x + y * y + z * z).sqrt()
    yaw = torch.atan2(y, x)
    pitch = torch.asin(z / r)
    fov_down = math.radians(FOV_DOWN_DEG)
    fov = math.radians(FOV_UP_DEG) - fov_down
    u = torch.floor(0.5 * (1.0 - yaw / math.pi) * width).clamp(0, width - 1).long()
    v = torch.floor((1.0 - (pitch - fov_down) / fov) * height).clamp(0, height - 1).long()
    return v, u


def ranges(points: torch.Tensor) -> torch.Tensor:
    """||xyz|| computed in float64, rounded once to the points' dtype (the z-buffer key)."""
    p = points[..., :3].double()
    return (p * p).sum(-1).sqrt().to(points.dtype)


class Model(nn.Module):
    def __init__(self, height: int, width: int):
        super().__init__()
        self.height, self.width = height, width

    def forward(self, points, n_valid):
        # points [B,N,4] (x, y, z, intensity), n_valid int64 [B] -> range [B,H,W], index [B,H,W], channels [B,4,H,W]
        B, N, C = points.shape
        H, W = self.height, self.width
        pixels = B * H * W
        v, u = project(points, H, W)
        r = ranges(points)
        point_id = torch.arange(N, device=points.device).expand(B, N)
        valid = point_id < n_valid[:, None]
        batch_id = torch.arange(B, device=points.device)[:, None]
        pixel = torch.where(valid, (batch_id * H + v) * W + u, pixels).reshape(-1)   # invalid -> spare slot
        r = r.reshape(-1)
        best = torch.full((pixels + 1,), math.inf, dtype=r.dtype, device=r.device)
        best = best.scatter_reduce(0, pixel, r, "amin")
        at_best = torch.where(r == best[pixel], pixel, pixels)
        winner = torch.full((pixels + 1,), N, dtype=torch.long, device=r.device)
        winner = winner.scatter_reduce(0, at_best, point_id.reshape(-1), "amin")[:pixels].reshape(B, H, W)
        empty = winner == N
        index = torch.where(empty, -1, winner)
        range_image = torch.where(empty, -1.0, best[:pixels].reshape(B, H, W)).to(points.dtype)
        gathered = torch.gather(points, 1, winner.clamp(max=N - 1).reshape(B, H * W, 1).expand(B, H * W, C))
        channels = torch.where(empty.reshape(B, H * W, 1), 0.0, gathered).to(points.dtype)
        return range_image, index, channels.permute(0, 2, 1).reshape(B, C, H, W).contiguous()


def get_init_inputs(shape):
    return {"height": int(shape["height"]), "width": int(shape["width"])}


def get_inputs(shape, generator, device):
    B, N = shape["batch"], shape["n_points"]
    f64 = torch.float64
    yaw = (2 * torch.rand(B, N, generator=generator, dtype=f64) - 1) * math.pi
    low, high = math.radians(FOV_DOWN_DEG - 1.0), math.radians(FOV_UP_DEG + 1.0)   # a few rows clamp
    pitch = low + (high - low) * torch.rand(B, N, generator=generator, dtype=f64)
    dist = torch.exp(math.log(1.0) + math.log(80.0) * torch.rand(B, N, generator=generator, dtype=f64))
    intensity = torch.rand(B, N, generator=generator, dtype=f64)
    points = torch.stack([dist * pitch.cos() * yaw.cos(), dist * pitch.cos() * yaw.sin(),
                          dist * pitch.sin(), intensity], -1).float()
    # real sweeps repeat returns: 1% of points duplicate an earlier one (ties go to the lower index)
    dup = torch.nonzero(torch.rand(B, N, generator=generator) < 0.01)
    source = (torch.rand(dup.shape[0], generator=generator) * dup[:, 1]).long()
    points[dup[:, 0], dup[:, 1]] = points[dup[:, 0], source]
    n_valid = N - (torch.rand(B, generator=generator) * 0.2 * N).long()              # padded tails
    return points.to(device), n_valid.to(device)


def check_output(inputs, output, expected, tolerance):
    """Indices: at least `fraction` of pixels identical. Where they match, range within
    atol + rtol |range| and channels bit-equal. Where they differ, the candidate's pixel must
    still be self-consistent: empty (-1, 0) or a valid point whose float64 projection is this
    pixel or a neighbour (a boundary case), with that point's range and channels."""
    points, n_valid = inputs
    rng, idx, ch = output
    rng_ref, idx_ref, ch_ref = (t.to(rng.device) for t in expected)
    B, N, C = points.shape
    _, H, W = idx_ref.shape
    same = idx == idx_ref
    frac = float(same.double().mean())
    need = float(tolerance.get("fraction", 0.9999))
    if frac < need:
        return False, f"index: {frac:.6f} of pixels match the reference (need {need})"
    atol, rtol = float(tolerance.get("atol", 1e-5)), float(tolerance.get("rtol", 0.0))
    far = (rng - rng_ref).abs() > atol + rtol * rng_ref.abs()
    if bool((far & same).any()):
        return False, f"range: {int((far & same).sum())} pixels with the reference's index differ beyond atol/rtol"
    ch_bad = (ch != ch_ref).any(1) & same
    if bool(ch_bad.any()):
        return False, f"channels: {int(ch_bad.sum())} pixels with the reference's index gather other values"
    b, py, px = torch.nonzero(~same, as_tuple=True)
    k = idx[b, py, px]
    empty = k == -1
    if bool(((rng[b, py, px] != -1) | (ch[b, :, py, px] != 0).any(1))[empty].any()):
        return False, "an empty pixel (index -1) must hold range -1 and zero channels"
    if bool(((k < -1) | (k >= n_valid[b])).any()):
        return False, "an index is neither -1 nor a valid point of its batch element"
    b, py, px, k = b[~empty], py[~empty], px[~empty], k[~empty]
    if k.numel():
        pts = points[b, k]
        v, u = project(pts, H, W)
        du = (u - px) % W
        if bool(((v - py).abs() > 1).any() or ((du > 1) & (du < W - 1)).any()):
            return False, "a pixel holds a point that projects more than one pixel away"
        r = ranges(pts)
        if bool(((rng[b, py, px] - r).abs() > atol + rtol * r.abs()).any() or (ch[b, :, py, px] != pts).any()):
            return False, "a pixel's range or channels are not those of its index's point"
    return True, f"index: {frac:.6f} of pixels match; ranges and channels agree"
