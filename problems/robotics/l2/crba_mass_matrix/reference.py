"""robotics/l2/crba_mass_matrix: joint-space inertia by the Composite-Rigid-Body Algorithm.

Featherstone, Rigid Body Dynamics Algorithms (2008), Table 6.2, on the serial chain of
robotics/l2/featherstone_aba: the mass matrix M(q), the bias torques C(q, qd) = RNEA(q, qd, 0)
and the Cholesky factor of M.
"""
import torch
import torch.nn as nn


def skew(x: torch.Tensor) -> torch.Tensor:
    """[..., 3] -> [..., 3, 3] with skew(x) @ y = x cross y."""
    z = torch.zeros_like(x[..., 0])
    return torch.stack([
        torch.stack([z, -x[..., 2], x[..., 1]], -1),
        torch.stack([x[..., 2], z, -x[..., 0]], -1),
        torch.stack([-x[..., 1], x[..., 0], z], -1),
    ], -2)


def blocks(a, b, c, d):
    return torch.cat([torch.cat([a, b], -1), torch.cat([c, d], -1)], -2)


def mv(M, x):
    return (M @ x[..., None])[..., 0]


def chain_buffers(E_tree, r_tree, axis, mass, com, I_com, gravity):
    """Plucker tree transforms [J,6,6], motion subspaces [J,6], spatial inertias [J,6,6], base accel [6]."""
    n = mass.shape[0]
    m, C, Z = mass[:, None, None], skew(com), torch.zeros_like(E_tree)
    XT = blocks(E_tree, Z, -E_tree @ skew(r_tree), E_tree)
    S = torch.cat([axis, torch.zeros_like(axis)], -1)
    eye = torch.eye(3, dtype=mass.dtype, device=mass.device).expand(n, 3, 3)
    inertia = blocks(I_com + m * C @ C.mT, m * C, m * C.mT, m * eye)
    a0 = torch.cat([torch.zeros_like(gravity), -gravity])   # fictitious base acceleration -g
    return XT, S, inertia, a0


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.linalg.cross(a, b, dim=-1)


def rnea(XT, S, inertia, a0, q, qd, qdd):
    B, J = q.shape
    K = skew(S[:, :3])
    K2 = K @ K
    X, f = [], []
    v, a = 0, a0.expand(B, 6)
    for i in range(J):                                        # forward pass: velocities, accelerations, forces
        sin, cos = torch.sin(q[:, i])[:, None, None], torch.cos(q[:, i])[:, None, None]
        Rt = (torch.eye(3, dtype=q.dtype, device=q.device) + sin * K[i] + (1 - cos) * K2[i]).mT
        Z = torch.zeros_like(Rt)
        X.append(blocks(Rt @ XT[i, :3, :3], Z, Rt @ XT[i, 3:, :3], Rt @ XT[i, 3:, 3:]))
        vJ = S[i] * qd[:, i:i + 1]
        v = (mv(X[i], v) if i else 0) + vJ
        w, lin = v[:, :3], v[:, 3:]
        c = torch.cat([cross(w, vJ[:, :3]), cross(lin, vJ[:, :3])], -1)          # crm(v) S qd
        a = mv(X[i], a) + S[i] * qdd[:, i:i + 1] + c
        h = mv(inertia[i], v)
        f.append(mv(inertia[i], a) + torch.cat([cross(w, h[:, :3]) + cross(lin, h[:, 3:]), cross(w, h[:, 3:])], -1))
    tau = [None] * J
    for i in reversed(range(J)):                              # backward pass: joint forces, tip to base
        tau[i] = f[i] @ S[i]
        if i:
            f[i - 1] = f[i - 1] + mv(X[i].mT, f[i])
    return torch.stack(tau, 1)


def joint_transforms(XT, S, q):
    K = skew(S[:, :3])
    K2 = K @ K
    X = []
    for i in range(q.shape[1]):
        sin, cos = torch.sin(q[:, i])[:, None, None], torch.cos(q[:, i])[:, None, None]
        Rt = (torch.eye(3, dtype=q.dtype, device=q.device) + sin * K[i] + (1 - cos) * K2[i]).mT
        Z = torch.zeros_like(Rt)
        X.append(blocks(Rt @ XT[i, :3, :3], Z, Rt @ XT[i, 3:, :3], Rt @ XT[i, 3:, 3:]))
    return X


def crba(XT, S, inertia, q):
    B, J = q.shape
    X = joint_transforms(XT, S, q)
    Ic = [inertia[i].expand(B, 6, 6) for i in range(J)]
    for i in reversed(range(1, J)):                           # composite inertias, tip to base
        Ic[i - 1] = Ic[i - 1] + X[i].mT @ Ic[i] @ X[i]
    M = torch.zeros(B, J, J, dtype=q.dtype, device=q.device)
    for i in range(J):
        F = mv(Ic[i], S[i].expand(B, 6))
        M[:, i, i] = F @ S[i]
        for j in reversed(range(1, i + 1)):                   # walk up the parents of i
            F = mv(X[j].mT, F)
            M[:, i, j - 1] = M[:, j - 1, i] = F @ S[j - 1]
    return M


class Model(nn.Module):
    def __init__(self, E_tree, r_tree, axis, mass, com, I_com, gravity):
        super().__init__()
        XT, S, inertia, a0 = chain_buffers(E_tree, r_tree, axis, mass, com, I_com, gravity)
        self.register_buffer("XT", XT)
        self.register_buffer("S", S)
        self.register_buffer("inertia", inertia)
        self.register_buffer("a0", a0)

    def forward(self, q, qd):                                 # -> M [B,J,J], C [B,J], L [B,J,J]
        M = crba(self.XT, self.S, self.inertia, q)
        C = rnea(self.XT, self.S, self.inertia, self.a0, q, qd, torch.zeros_like(q))
        return M, C, torch.linalg.cholesky(M)


def random_chain(n_joints: int, seed: int = 0) -> dict:
    """A physically valid random chain: proper rotations, SPD inertias, unit axes, ~0.3 m links."""
    g = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(n_joints, 3, 3, generator=g, dtype=torch.float64))[0]
    Q = Q * torch.linalg.det(Q)[:, None, None]
    A = torch.randn(n_joints, 3, 3, generator=g, dtype=torch.float64) * 0.05
    axis = torch.randn(n_joints, 3, generator=g, dtype=torch.float64)
    chain = dict(
        E_tree=Q,
        r_tree=torch.randn(n_joints, 3, generator=g, dtype=torch.float64) * 0.3,
        axis=axis / axis.norm(dim=-1, keepdim=True),
        mass=0.5 + 2 * torch.rand(n_joints, generator=g, dtype=torch.float64),
        com=0.1 * torch.randn(n_joints, 3, generator=g, dtype=torch.float64),
        I_com=A @ A.mT + 0.01 * torch.eye(3, dtype=torch.float64),
        gravity=torch.tensor([0.0, 0.0, -9.81], dtype=torch.float64),
    )
    return {k: v.float() for k, v in chain.items()}


def get_init_inputs(shape):
    return random_chain(shape["n_joints"])


def get_inputs(shape, generator, device):
    b, j = shape["batch"], shape["n_joints"]
    q = torch.rand(b, j, generator=generator) * 6.28 - 3.14
    qd = torch.randn(b, j, generator=generator)
    return q.to(device), qd.to(device)


def tolerance_scale(inputs, output):
    """Per sample, the largest |entry| of each output: the entries of one chain share its composite
    inertias and summed forces (terms of that size cancel in the light, distal entries)."""
    return tuple(o.abs().flatten(1).amax(1).reshape((-1,) + (1,) * (o.dim() - 1)).expand_as(o) for o in output)
