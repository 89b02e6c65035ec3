"""robotics/l3/bundle_adjustment_schur: one Levenberg-Marquardt step of bundle adjustment.

Pinhole cameras (axis-angle omega, translation t; x_c = R(omega) X + t, r = f (x/z, y/z) - uv),
left-perturbation Jacobians (Exp(d_omega) R, t + d_t), the points eliminated by the Schur
complement S = U - sum_pairs W_m1 V_p^-1 W_m2^T (dense [6C,6C], float64), a Cholesky solve for
the cameras and back-substitution for the points.
"""
import torch
import torch.nn as nn


def hat(v: torch.Tensor) -> torch.Tensor:
    x, y, z = v.unbind(-1)
    zero = torch.zeros_like(x)
    return torch.stack([torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1),
                        torch.stack([-y, x, zero], -1)], -2)


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Rodrigues: [..., 3] -> [..., 3, 3] (series for small angles)."""
    theta2 = (omega * omega).sum(-1)[..., None, None]
    theta = theta2.sqrt()
    small = theta < 1e-4
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(safe) / safe)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(safe)) / (safe * safe))
    k = hat(omega)
    return torch.eye(3, dtype=omega.dtype, device=omega.device) + a * k + b * (k @ k)


def so3_log(R: torch.Tensor) -> torch.Tensor:
    """[..., 3, 3] -> axis-angle [..., 3] for rotation angles below pi (atan2 form)."""
    v = 0.5 * torch.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    sin = v.norm(dim=-1)
    cos = 0.5 * (R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2] - 1)
    theta = torch.atan2(sin, cos)
    small = sin < 1e-6
    scale = torch.where(small, 1 + theta * theta / 6, theta / torch.where(small, torch.ones_like(sin), sin))
    return v * scale[..., None]


def residuals_and_jacobians(cameras, focal, points, cam, pt, uv):
    """r [M,2], J_c [M,2,6] (d_omega, d_t), J_p [M,2,3], in the input dtype."""
    R = so3_exp(cameras[:, :3])[cam]                               # [M,3,3]
    y = (R @ points[pt][..., None])[..., 0]                        # R X
    xc = y + cameras[cam, 3:]
    x, yy, z = xc.unbind(-1)
    r = focal * xc[:, :2] / z[:, None] - uv
    inv_z = 1 / z
    zero = torch.zeros_like(z)
    dpi = focal * torch.stack([torch.stack([inv_z, zero, -x * inv_z * inv_z], -1),
                               torch.stack([zero, inv_z, -yy * inv_z * inv_z], -1)], -2)   # [M,2,3]
    J_c = torch.cat([-dpi @ hat(y), dpi], -1)                      # d(x_c)/d(d_omega) = -[R X]_x
    J_p = dpi @ R
    return r, J_c, J_p


def reprojection_cost(cameras, focal, points, cam, pt, uv):
    r = residuals_and_jacobians(cameras, focal, points, cam, pt, uv)[0]
    return 0.5 * r.double().square().sum()


class Model(nn.Module):
    def forward(self, cameras, focal, points, cam, pt, uv, pairs, mu):
        C, P = cameras.shape[0], points.shape[0]
        f64 = torch.float64
        r, J_c, J_p = (t.to(f64) for t in residuals_and_jacobians(cameras, focal, points, cam, pt, uv))
        mu = mu.to(f64)
        Jc_T, Jp_T = J_c.transpose(1, 2), J_p.transpose(1, 2)
        U = torch.zeros(C, 6, 6, dtype=f64, device=cameras.device).index_add_(0, cam, Jc_T @ J_c)
        U = U + mu * torch.eye(6, dtype=f64, device=cameras.device)
        V = torch.zeros(P, 3, 3, dtype=f64, device=cameras.device).index_add_(0, pt, Jp_T @ J_p)
        V_inv = torch.linalg.inv(V + mu * torch.eye(3, dtype=f64, device=cameras.device))
        W = Jc_T @ J_p                                                 # [M,6,3]
        g_c = torch.zeros(C, 6, dtype=f64, device=cameras.device).index_add_(0, cam, (Jc_T @ r[..., None])[..., 0])
        g_p = torch.zeros(P, 3, dtype=f64, device=cameras.device).index_add_(0, pt, (Jp_T @ r[..., None])[..., 0])

        m1, m2 = pairs[:, 0], pairs[:, 1]
        blocks = W[m1] @ V_inv[pt[m1]] @ W[m2].transpose(1, 2)        # [Q,6,6]
        S = torch.zeros(C * C, 6, 6, dtype=f64, device=cameras.device).index_add_(0, cam[m1] * C + cam[m2], -blocks)
        S = S.reshape(C, C, 6, 6).permute(0, 2, 1, 3).reshape(6 * C, 6 * C)
        S = S + torch.block_diag(*U)
        WVg = (W @ (V_inv[pt] @ g_p[pt][..., None]))[..., 0]          # [M,6]
        rhs = -g_c + torch.zeros(C, 6, dtype=f64, device=cameras.device).index_add_(0, cam, WVg)
        dc = torch.cholesky_solve(rhs.reshape(-1, 1), torch.linalg.cholesky(S)).reshape(C, 6)
        WTdc = (W.transpose(1, 2) @ dc[cam][..., None])[..., 0]       # [M,3]
        back = torch.zeros(P, 3, dtype=f64, device=cameras.device).index_add_(0, pt, WTdc)
        dp = (V_inv @ (-g_p - back)[..., None])[..., 0]

        R_new = so3_exp(dc[:, :3]) @ so3_exp(cameras[:, :3].to(f64))
        new_cameras = torch.cat([so3_log(R_new), cameras[:, 3:].to(f64) + dc[:, 3:]], -1).to(cameras.dtype)
        new_points = (points.to(f64) + dp).to(points.dtype)
        cost = torch.stack([reprojection_cost(cameras, focal, points, cam, pt, uv),
                            reprojection_cost(new_cameras, focal, new_points, cam, pt, uv)])
        return new_cameras, new_points, cost.to(cameras.dtype)


def get_init_inputs(shape):
    return {}


FOCAL = 500.0


def look_at(position: torch.Tensor, target: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """World-to-camera rotations [C,3,3] whose z axis points from position to target."""
    z = torch.nn.functional.normalize(target - position, dim=-1)
    x = torch.nn.functional.normalize(torch.linalg.cross(up, z, dim=-1), dim=-1)
    y = torch.linalg.cross(z, x, dim=-1)
    return torch.stack([x, y, z], -2)


def get_inputs(shape, generator, device):
    C, P, k = shape["n_cams"], shape["n_points"], shape["obs_per_point"]
    g = generator
    X = torch.rand(P, 3, generator=g) * 2 - 1
    position = torch.nn.functional.normalize(torch.randn(C, 3, generator=g), dim=-1) * (4 + 2 * torch.rand(C, 1, generator=g))
    target = 0.3 * torch.randn(C, 3, generator=g)
    up = torch.nn.functional.normalize(torch.randn(C, 3, generator=g), dim=-1)
    R = look_at(position, target, up)
    omega_true, t_true = so3_log(R), -(R @ position[..., None])[..., 0]
    # each point seen by k distinct cameras; observations in random order
    cam = torch.rand(P, C, generator=g).topk(k, dim=1).indices.reshape(-1)
    pt = torch.arange(P).repeat_interleave(k)
    order = torch.randperm(P * k, generator=g)
    cam, pt = cam[order], pt[order]
    truth = torch.cat([omega_true, t_true], -1)
    uv = residuals_and_jacobians(truth, torch.tensor(FOCAL), X, cam, pt, torch.zeros(P * k, 2))[0]
    uv = uv + 0.5 * torch.randn(P * k, 2, generator=g)
    # the pairs (m1, m2) of observations of one point, both orders and m1 == m2, grouped by point
    by_point = torch.argsort(pt, stable=True).reshape(P, k)
    pairs = torch.stack([by_point[:, :, None].expand(P, k, k), by_point[:, None, :].expand(P, k, k)], -1).reshape(-1, 2)
    cameras = torch.cat([omega_true + 0.005 * torch.randn(C, 3, generator=g), t_true + 0.02 * torch.randn(C, 3, generator=g)], -1)
    points = X + 0.01 * torch.randn(P, 3, generator=g)
    focal, mu = torch.tensor(FOCAL), torch.tensor(100.0)
    return tuple(t.to(device) for t in (cameras, focal, points, cam, pt, uv, pairs, mu))
