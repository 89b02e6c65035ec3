"""robotics/l1/sdf_sphere_collision_cost: CHOMP obstacle cost of robot spheres in a voxel SDF.

Each configuration is a set of S spheres; the signed distance at a sphere centre comes
from trilinear interpolation of the SDF grid (x -> W, y -> H, z -> D), and the CHOMP
hinge cost of d = sdf - r and its gradient with respect to the centre are returned.
"""
import torch
import torch.nn as nn

EPS = 0.05
VOXEL = 2.0 ** -7      # a power of two: (c - origin) / h is exact, so every solution finds the same cell


class Model(nn.Module):
    def forward(self, sdf, origin, voxel, centres, radii):
        D, H, W = sdf.shape
        dims = torch.tensor([W, H, D], device=sdf.device)                      # x, y, z extents
        g_raw = (centres - origin) / voxel                                       # [B,S,3] grid coords
        g = torch.minimum(torch.clamp(g_raw, min=0), (dims - 1).to(g_raw.dtype))
        i0 = torch.minimum(torch.floor(g), (dims - 2).to(g.dtype))
        f = g - i0
        i0 = i0.long()
        ix, iy, iz = i0.unbind(-1)
        fx, fy, fz = f.unbind(-1)
        flat = sdf.reshape(-1)

        def corner(dx, dy, dz):
            return flat[((iz + dz) * H + (iy + dy)) * W + (ix + dx)]

        c = {(dx, dy, dz): corner(dx, dy, dz) for dx in (0, 1) for dy in (0, 1) for dz in (0, 1)}
        # interpolate along x, then y, then z
        c00 = c[0, 0, 0] + fx * (c[1, 0, 0] - c[0, 0, 0])
        c10 = c[0, 1, 0] + fx * (c[1, 1, 0] - c[0, 1, 0])
        c01 = c[0, 0, 1] + fx * (c[1, 0, 1] - c[0, 0, 1])
        c11 = c[0, 1, 1] + fx * (c[1, 1, 1] - c[0, 1, 1])
        c0 = c00 + fy * (c10 - c00)
        c1 = c01 + fy * (c11 - c01)
        value = c0 + fz * (c1 - c0)
        # partial derivatives of the interpolant with respect to fx, fy, fz
        ex0 = (c[1, 0, 0] - c[0, 0, 0]) + fy * ((c[1, 1, 0] - c[0, 1, 0]) - (c[1, 0, 0] - c[0, 0, 0]))
        ex1 = (c[1, 0, 1] - c[0, 0, 1]) + fy * ((c[1, 1, 1] - c[0, 1, 1]) - (c[1, 0, 1] - c[0, 0, 1]))
        d_fx = ex0 + fz * (ex1 - ex0)
        d_fy = (c10 - c00) + fz * ((c11 - c01) - (c10 - c00))
        d_fz = c1 - c0
        inside = ((g_raw >= 0) & (g_raw <= (dims - 1).to(g_raw.dtype))).to(g.dtype)  # clamped axes get no gradient
        grad_sdf = torch.stack([d_fx, d_fy, d_fz], -1) / voxel * inside

        d = value - radii
        cost = torch.where(d < 0, -d + EPS / 2, torch.where(d <= EPS, (d - EPS) ** 2 / (2 * EPS), torch.zeros_like(d)))
        slope = torch.where(d < 0, -torch.ones_like(d), torch.where(d <= EPS, (d - EPS) / EPS, torch.zeros_like(d)))
        return cost.sum(-1), slope[..., None] * grad_sdf


def get_init_inputs(shape):
    return {}


def obstacle_sdf(n: int, generator: torch.Generator, n_obstacles: int = 24, coarse: int = 48):
    """SDF of a union of balls on an n^3 grid (metres), and the world position of voxel (0,0,0).

    The exact distance is evaluated on a coarse grid spanning the same voxel centres and
    upsampled trilinearly, so large grids are generated in one pass.
    """
    span = (n - 1) * VOXEL                                  # first to last voxel centre
    origin = torch.tensor([-span / 2, -span / 2, 0.0])
    centres = origin + torch.rand(n_obstacles, 3, generator=generator) * span
    radii = span * (0.04 + 0.12 * torch.rand(n_obstacles, generator=generator))
    axis = torch.linspace(0, span, coarse)
    zz, yy, xx = axis[:, None, None] + origin[2], axis[None, :, None] + origin[1], axis[None, None, :] + origin[0]
    sdf = torch.full((coarse, coarse, coarse), float("inf"))
    for (cx, cy, cz), r in zip(centres.tolist(), radii.tolist()):
        torch.minimum(sdf, ((xx - cx) ** 2 + (yy - cy) ** 2 + (zz - cz) ** 2).sqrt() - r, out=sdf)
    fine = torch.nn.functional.interpolate(sdf[None, None], size=(n, n, n), mode="trilinear", align_corners=True)
    return fine[0, 0].contiguous(), origin


def get_inputs(shape, generator, device):
    n, b, s = shape["grid"], shape["batch"], shape["spheres"]
    sdf, origin = obstacle_sdf(n, generator)
    extent = (n - 1) * VOXEL
    # sphere centres spread over the grid and 5% beyond it, so some coordinates are clamped
    low = origin - 0.05 * extent
    centres = low + torch.rand(b, s, 3, generator=generator) * 1.1 * extent
    radii = extent * (0.01 + 0.03 * torch.rand(s, generator=generator))
    voxel = torch.tensor(VOXEL)
    return tuple(t.to(device) for t in (sdf, origin, voxel, centres, radii))
