"""robotics/l2/geometric_jacobian: end-effector pose and geometric Jacobian of a URDF-style chain."""
import torch
import torch.nn as nn


def skew(x: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(x[..., 0])
    return torch.stack([
        torch.stack([z, -x[..., 2], x[..., 1]], -1),
        torch.stack([x[..., 2], z, -x[..., 0]], -1),
        torch.stack([-x[..., 1], x[..., 0], z], -1),
    ], -2)


def rodrigues(axis: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Rotation by q [B] about the unit axis [3] -> [B,3,3]."""
    K = skew(axis)
    eye = torch.eye(3, dtype=q.dtype, device=q.device)
    return eye + torch.sin(q)[:, None, None] * K + (1 - torch.cos(q))[:, None, None] * (K @ K)


class Model(nn.Module):
    def __init__(self, R_f, p_f, axis, T_ee):
        super().__init__()
        self.register_buffer("R_f", R_f)          # [J,3,3] fixed parent -> joint rotation
        self.register_buffer("p_f", p_f)          # [J,3]   fixed parent -> joint offset
        self.register_buffer("axis", axis)        # [J,3]   unit joint axis in the joint frame
        self.register_buffer("T_ee", T_ee)        # [4,4]   last joint -> end effector

    def forward(self, q):                         # q [B,J] -> (jacobian [B,6,J], T_E [B,4,4])
        B, J = q.shape
        R = torch.eye(3, dtype=q.dtype, device=q.device).expand(B, 3, 3)
        p = torch.zeros(B, 3, dtype=q.dtype, device=q.device)
        z, o = [], []
        for j in range(J):                        # T_j = T_{j-1} [R_f, p_f] Rot(a_j, q_j)
            p = p + R @ self.p_f[j]
            R = R @ self.R_f[j] @ rodrigues(self.axis[j], q[:, j])
            z.append(R @ self.axis[j])            # world joint axis
            o.append(p)                           # world joint origin
        p_E = p + R @ self.T_ee[:3, 3]
        R_E = R @ self.T_ee[:3, :3]
        z, o = torch.stack(z, -1), torch.stack(o, -1)                           # [B,3,J]
        linear = torch.linalg.cross(z, p_E[:, :, None] - o, dim=1)              # z_j x (p_E - o_j)
        jacobian = torch.cat([linear, z], 1)
        bottom = torch.tensor([0, 0, 0, 1], dtype=q.dtype, device=q.device).expand(B, 1, 4)
        T_E = torch.cat([torch.cat([R_E, p_E[:, :, None]], 2), bottom], 1)
        return jacobian, T_E


def _random_rotations(n: int, g: torch.Generator) -> torch.Tensor:
    Q = torch.linalg.qr(torch.randn(n, 3, 3, generator=g, dtype=torch.float64))[0]
    return Q * torch.linalg.det(Q)[:, None, None]


def get_init_inputs(shape):
    j = shape["n_joints"]
    g = torch.Generator().manual_seed(0)
    axis = torch.randn(j, 3, generator=g, dtype=torch.float64)
    T_ee = torch.eye(4, dtype=torch.float64)
    T_ee[:3, :3] = _random_rotations(1, g)[0]
    T_ee[:3, 3] = torch.randn(3, generator=g, dtype=torch.float64) * 0.1
    chain = dict(
        R_f=_random_rotations(j, g),
        p_f=torch.randn(j, 3, generator=g, dtype=torch.float64) * 0.2,   # links of ~0.35 m
        axis=axis / axis.norm(dim=-1, keepdim=True),
        T_ee=T_ee,
    )
    return {k: v.float() for k, v in chain.items()}


def get_inputs(shape, generator, device):
    q = (torch.rand(shape["batch"], shape["n_joints"], generator=generator) * 2 - 1) * torch.pi
    return (q.to(device),)
