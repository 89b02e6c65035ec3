"""robotics/l1/point_to_plane_icp_normal_equations: one Gauss-Newton step of point-to-plane ICP.

Residual r_i = n_i . (p_i - q_i), Jacobian J_i = [p_i x n_i, n_i] (small-angle linearisation,
Low 2004); the 6x6 normal equations are accumulated in float64 and solved by Cholesky.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, src, dst, normals, weights):
        p, q, n, w = src.double(), dst.double(), normals.double(), weights.double()
        r = (n * (p - q)).sum(-1)                                      # [B,N]
        J = torch.cat([torch.linalg.cross(p, n, dim=-1), n], -1)      # [B,N,6]
        A = torch.einsum("bni,bnj->bij", J * w[..., None], J)
        g = (J * (w * r)[..., None]).sum(1)
        cost = (w * r * r).sum(1)
        eye = torch.eye(6, dtype=A.dtype, device=A.device)
        x = -torch.cholesky_solve(g[..., None], torch.linalg.cholesky(A + 1e-9 * eye))[..., 0]
        return A.float(), g.float(), cost.float(), x.float()


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    b, n = shape["batch"], shape["n_points"]
    g = generator
    src = (torch.rand(b, n, 3, generator=g) * 2 - 1)                  # points in a 2 m cube
    normals = torch.nn.functional.normalize(torch.randn(b, n, 3, generator=g), dim=-1)
    # dst: src moved by a small rigid motion plus noise, so the step is well posed
    angle = 0.05 * torch.randn(b, 3, generator=g)
    shift = 0.05 * torch.randn(b, 1, 3, generator=g)
    dst = src + torch.linalg.cross(angle[:, None].expand_as(src), src, dim=-1) + shift \
        + 0.005 * torch.randn(b, n, 3, generator=g)
    weights = torch.rand(b, n, generator=g)
    return tuple(t.to(device) for t in (src, dst, normals, weights))
