"""robotics/l1/occupancy_grid_raycast: log-odds occupancy-grid update by Bresenham ray casting.

Every beam walks the integer all-octant Bresenham line from the sensor's cell to its
endpoint's cell: the cells before the endpoint get L_FREE, the endpoint cell gets L_OCC
on a hit (L_FREE on a max-range return). Cell (x, y) is grid[y, x]; cells outside the
grid are skipped. The increments are multiples of 1/8, so every sum is exact in any order.
"""
import torch
import torch.nn as nn

L_FREE = -0.375
L_OCC = 0.875
L_MIN, L_MAX = -4.0, 4.0
BOUNDARY_MARGIN = 0.02     # inputs keep every point this far (in cells) from a cell boundary


class Model(nn.Module):
    def forward(self, grid, origins, endpoints, hit, res):
        # grid [H,W] log-odds, origins [P,2], endpoints [P,Bm,2] (metres), hit bool [P,Bm], res 0-d
        H, W = grid.shape
        P, Bm, _ = endpoints.shape
        c0 = torch.floor(origins / res).long()                      # sensor cells [P,2]
        c1 = torch.floor(endpoints / res).long().reshape(-1, 2)     # endpoint cells [P*Bm,2]
        x = c0[:, 0].repeat_interleave(Bm)
        y = c0[:, 1].repeat_interleave(Bm)
        x1, y1 = c1[:, 0], c1[:, 1]
        dx, dy = (x1 - x).abs(), -(y1 - y).abs()
        sx = torch.where(x < x1, 1, -1)
        sy = torch.where(y < y1, 1, -1)
        err = dx + dy
        n_steps = torch.maximum(dx, -dy)                            # cells before the endpoint
        delta = torch.zeros(H * W, dtype=grid.dtype, device=grid.device)
        free = torch.full(x.shape, L_FREE, dtype=grid.dtype, device=grid.device)

        def add(cx, cy, value, mask):
            inside = mask & (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
            index = torch.where(inside, cy * W + cx, 0)
            delta.index_add_(0, index, torch.where(inside, value, torch.zeros_like(value)))

        for step in range(int(n_steps.max()) if n_steps.numel() else 0):
            active = step < n_steps
            add(x, y, free, active)
            e2 = 2 * err
            move_x = active & (e2 >= dy)
            move_y = active & (e2 <= dx)
            err = err + torch.where(move_x, dy, 0) + torch.where(move_y, dx, 0)
            x = x + torch.where(move_x, sx, 0)
            y = y + torch.where(move_y, sy, 0)
        occupied = torch.where(hit.reshape(-1), L_OCC, L_FREE).to(grid.dtype)
        add(x1, y1, occupied, torch.ones_like(hit.reshape(-1)))
        return torch.clamp(grid + delta.reshape(H, W), L_MIN, L_MAX)


def get_init_inputs(shape):
    return {}


def _off_boundary(metres: torch.Tensor, res: float) -> torch.Tensor:
    """Move each coordinate at most BOUNDARY_MARGIN cells inside its cell (float64 in, float32 out):
    floor(point / res) is then the same under any division rounding."""
    cells = metres / res
    whole = torch.floor(cells)
    frac = (cells - whole).clamp(BOUNDARY_MARGIN, 1 - BOUNDARY_MARGIN)
    return ((whole + frac) * res).float()


def get_inputs(shape, generator, device):
    n, P, Bm = shape["grid"], shape["n_scans"], shape["beams"]
    max_range = float(shape["max_range"])
    res = float(torch.tensor(float(shape["res"]), dtype=torch.float32))     # the float32 value forward sees
    extent = n * res
    grid = torch.randint(-32, 33, (n, n), generator=generator).float() / 8          # dyadic prior
    origins = extent * (0.1 + 0.8 * torch.rand(P, 2, generator=generator, dtype=torch.float64))
    heading = 2 * torch.pi * torch.rand(P, 1, generator=generator, dtype=torch.float64)
    jitter = torch.rand(P, Bm, generator=generator, dtype=torch.float64) - 0.5
    angle = heading + 2 * torch.pi * (torch.arange(Bm, dtype=torch.float64) + 0.1 * jitter) / Bm
    ranges = max_range * (0.05 + 0.95 * torch.rand(P, Bm, generator=generator, dtype=torch.float64))
    no_return = torch.rand(P, Bm, generator=generator) < 0.15                      # max-range returns
    ranges = torch.where(no_return, torch.full_like(ranges, max_range), ranges)
    endpoints = origins[:, None, :] + ranges[..., None] * torch.stack([angle.cos(), angle.sin()], -1)
    tensors = (grid, _off_boundary(origins, res), _off_boundary(endpoints, res), ~no_return,
               torch.tensor(res, dtype=torch.float32))
    return tuple(t.to(device) for t in tensors)
