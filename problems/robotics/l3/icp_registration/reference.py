"""robotics/l3/icp_registration: K iterations of point-to-plane ICP with brute-force nearest neighbours.

Each iteration transforms src by the current pose, finds the exact nearest dst point of every
src point (squared distances in 2048-point dst chunks, ties to the lower index), rejects pairs
at distance >= d_max, solves the point-to-plane normal equations of
robotics/l1/point_to_plane_icp_normal_equations (unit weights, float64 accumulation) and
composes the increment on the left: pose <- (Exp(omega), t) o pose.
"""
import math

import torch
import torch.nn as nn

DST_CHUNK = 2048
ELEMENTS_PER_BLOCK = 2 ** 25          # bounds the [B, rows, 2048] distance temporaries


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Rodrigues: [..., 3] axis-angle -> [..., 3, 3] rotation (series for small angles)."""
    theta2 = (omega * omega).sum(-1)[..., None, None]
    theta = theta2.sqrt()
    small = theta < 1e-4
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(safe) / safe)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(safe)) / (safe * safe))
    x, y, z = omega.unbind(-1)
    zero = torch.zeros_like(x)
    k = torch.stack([torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1),
                     torch.stack([-y, x, zero], -1)], -2)
    eye = torch.eye(3, dtype=omega.dtype, device=omega.device)
    return eye + a * k + b * (k @ k)


def nearest_neighbours(p: torch.Tensor, q: torch.Tensor):
    """Index [B,N] of the nearest q of every p and its squared distance (ties: lower index)."""
    B, N, _ = p.shape
    M = q.shape[1]
    best_d2 = torch.full((B, N), math.inf, dtype=p.dtype, device=p.device)
    best_idx = torch.zeros(B, N, dtype=torch.long, device=p.device)
    rows = max(1, ELEMENTS_PER_BLOCK // (B * DST_CHUNK))
    for r0 in range(0, N, rows):
        pb = p[:, r0:r0 + rows]
        for c0 in range(0, M, DST_CHUNK):
            qc = q[:, c0:c0 + DST_CHUNK]
            d2 = (pb[:, :, None, 0] - qc[:, None, :, 0]) ** 2
            d2 = d2 + (pb[:, :, None, 1] - qc[:, None, :, 1]) ** 2
            d2 = d2 + (pb[:, :, None, 2] - qc[:, None, :, 2]) ** 2
            idx = torch.argmin(d2, -1)                                 # first minimum in the chunk
            d2min = torch.gather(d2, -1, idx[..., None])[..., 0]
            better = d2min < best_d2[:, r0:r0 + rows]                  # strict: earlier chunk wins ties
            best_d2[:, r0:r0 + rows] = torch.where(better, d2min, best_d2[:, r0:r0 + rows])
            best_idx[:, r0:r0 + rows] = torch.where(better, idx + c0, best_idx[:, r0:r0 + rows])
    return best_idx, best_d2


class Model(nn.Module):
    def __init__(self, iters: int):
        super().__init__()
        self.iters = iters

    def forward(self, src, dst, dst_normals, d_max):
        B = src.shape[0]
        pose = torch.eye(4, dtype=torch.float64, device=src.device).repeat(B, 1, 1)
        eye6 = torch.eye(6, dtype=torch.float64, device=src.device)
        for _ in range(self.iters):
            T = pose.to(src.dtype)
            p = src @ T[:, :3, :3].transpose(1, 2) + T[:, None, :3, 3]    # current src in the dst frame
            idx, d2 = nearest_neighbours(p, dst)
            inlier = d2 < d_max * d_max
            q = torch.gather(dst, 1, idx[..., None].expand(-1, -1, 3)).double()
            n = torch.gather(dst_normals, 1, idx[..., None].expand(-1, -1, 3)).double()
            w = inlier.double()
            pd = p.double()
            r = (n * (pd - q)).sum(-1)                                    # point-to-plane residual
            J = torch.cat([torch.linalg.cross(pd, n, dim=-1), n], -1)      # [B,N,6]
            A = torch.einsum("bni,bnj->bij", J * w[..., None], J)
            g = (J * (w * r)[..., None]).sum(1)
            x = -torch.cholesky_solve(g[..., None], torch.linalg.cholesky(A + 1e-9 * eye6))[..., 0]
            step = torch.eye(4, dtype=torch.float64, device=src.device).repeat(B, 1, 1)
            step[:, :3, :3] = so3_exp(x[:, :3])
            step[:, :3, 3] = x[:, 3:]
            pose = step @ pose
            count = inlier.sum(1)
            rmse = ((w * r * r).sum(1) / count.clamp(min=1)).sqrt()      # of this iteration's inliers
        return pose.to(src.dtype), rmse.to(src.dtype), count


def get_init_inputs(shape):
    return {"iters": shape["iters"]}


def sample_scene(count: int, spheres: torch.Tensor, g: torch.Generator):
    """Points and unit normals on a floor (z=0), two walls (x=-1, y=-1) and 6 spheres."""
    kind = torch.randint(0, 3 + len(spheres), (count,), generator=g)
    u = torch.rand(count, 2, generator=g)
    pts = torch.empty(count, 3)
    nrm = torch.zeros(count, 3)
    floor, wall_x, wall_y = kind == 0, kind == 1, kind == 2
    pts[floor] = torch.stack([u[floor, 0] * 2 - 1, u[floor, 1] * 2 - 1, torch.zeros(int(floor.sum()))], -1)
    nrm[floor, 2] = 1
    pts[wall_x] = torch.stack([-torch.ones(int(wall_x.sum())), u[wall_x, 0] * 2 - 1, u[wall_x, 1]], -1)
    nrm[wall_x, 0] = 1
    pts[wall_y] = torch.stack([u[wall_y, 0] * 2 - 1, -torch.ones(int(wall_y.sum())), u[wall_y, 1]], -1)
    nrm[wall_y, 1] = 1
    on_sphere = kind >= 3
    direction = torch.nn.functional.normalize(torch.randn(count, 3, generator=g), dim=-1)
    centre, radius = spheres[kind.clamp(min=3) - 3, :3], spheres[kind.clamp(min=3) - 3, 3:]
    pts[on_sphere] = (centre + radius * direction)[on_sphere]
    nrm[on_sphere] = direction[on_sphere]
    return pts, nrm


def get_inputs(shape, generator, device):
    B, N, M = shape["batch"], shape["n_src"], shape["n_dst"]
    g = generator
    src, dst, normals = [], [], []
    for _ in range(B):
        spheres = torch.cat([torch.rand(6, 2, generator=g) * 1.2 - 0.6, 0.2 + 0.4 * torch.rand(6, 1, generator=g),
                             0.1 + 0.2 * torch.rand(6, 1, generator=g)], -1)
        q, n = sample_scene(M, spheres, g)
        p, _ = sample_scene(N, spheres, g)                      # an independent sampling of the same scene
        p = p + 0.003 * torch.randn(N, 3, generator=g)
        outlier = torch.rand(N, generator=g) < 0.05
        p[outlier] = (torch.rand(N, 3, generator=g) * torch.tensor([2.0, 2.0, 1.0]) - torch.tensor([1.0, 1.0, 0.0]))[outlier]
        # the true pose maps src onto dst: src = R^T (p - t)
        R = so3_exp(0.1 * torch.nn.functional.normalize(torch.randn(3, generator=g), dim=0) * (0.5 + torch.rand(1, generator=g)))
        t = 0.05 * torch.randn(3, generator=g)
        src.append((p - t) @ R)
        dst.append(q)
        normals.append(n)
    d_max = torch.tensor(0.2)
    return tuple(t.to(device) for t in (torch.stack(src), torch.stack(dst), torch.stack(normals), d_max))


def check_output(inputs, output, expected, tolerance):
    """Pose allclose; inlier counts within `fraction` (of the reference count); inlier sum of squares within rtol,
    plus d_max^2 for every pair that a near-tie or a distance at d_max moved across the cut."""
    pose, rmse, count = output
    pose_ref, rmse_ref, count_ref = expected
    atol, rtol = tolerance["atol"], tolerance["rtol"]
    d_max = float(inputs[3])
    bad = (pose.double() - pose_ref.double()).abs() > atol + rtol * pose_ref.double().abs()
    if bad.any():
        err = float((pose.double() - pose_ref.double()).abs().max())
        return False, f"pose: {int(bad.sum())} entries off (max abs error {err:.3g})"
    moved = (count - count_ref).abs()
    if (moved.double() > tolerance["fraction"] * count_ref.double()).any():
        return False, f"inlier count differs by {int(moved.max())} (allowed {tolerance['fraction']:.1%})"
    sse, sse_ref = rmse.double() ** 2 * count.double(), rmse_ref.double() ** 2 * count_ref.double()
    allowed = rtol * sse_ref + moved.double() * d_max ** 2 + atol ** 2
    if ((sse - sse_ref).abs() > allowed).any():
        return False, f"inlier sum of squared residuals off by {float((sse - sse_ref).abs().max()):.3g}"
    return True, f"pose max abs error {float((pose.double() - pose_ref.double()).abs().max()):.3g}"
