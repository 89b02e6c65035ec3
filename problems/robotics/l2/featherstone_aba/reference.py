"""robotics/l2/featherstone_aba: forward dynamics of a serial chain by the Articulated-Body Algorithm.

Featherstone, Rigid Body Dynamics Algorithms (2008), Table 7.1, revolute joints, spatial
vectors ordered [angular; linear]. The chain model (Plucker tree transforms, joint axes,
link inertias, gravity) is the module's state; inputs are q, qd, tau [B,J].
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


def aba(XT, S, inertia, a0, q, qd, tau):
    B, J = q.shape
    K = skew(S[:, :3])                                        # [J,3,3] joint axes as cross-product matrices
    K2 = K @ K
    X, v, c, IA, pA = [], [], [], [], []
    for i in range(J):                                        # pass 1: velocities and bias forces
        # X_J = blockdiag(R^T, R^T), R = Rodrigues(axis, q) = I + sin(q) K + (1 - cos(q)) K^2
        sin, cos = torch.sin(q[:, i])[:, None, None], torch.cos(q[:, i])[:, None, None]
        Rt = (torch.eye(3, dtype=q.dtype, device=q.device) + sin * K[i] + (1 - cos) * K2[i]).mT
        Z = torch.zeros_like(Rt)
        X.append(blocks(Rt @ XT[i, :3, :3], Z, Rt @ XT[i, 3:, :3], Rt @ XT[i, 3:, 3:]))
        vJ = S[i] * qd[:, i:i + 1]
        v.append((mv(X[i], v[i - 1]) if i else 0) + vJ)
        w, lin = v[i][:, :3], v[i][:, 3:]
        c.append(torch.cat([cross(w, vJ[:, :3]), cross(lin, vJ[:, :3])], -1))       # crm(v) vJ
        h = mv(inertia[i], v[i])
        pA.append(torch.cat([cross(w, h[:, :3]) + cross(lin, h[:, 3:]), cross(w, h[:, 3:])], -1))  # crf(v) I v
        IA.append(inertia[i].expand(B, 6, 6))
    U, D, u = [None] * J, [None] * J, [None] * J
    for i in reversed(range(J)):                              # pass 2: articulated-body inertias, tip to base
        U[i] = mv(IA[i], S[i].expand(B, 6))
        D[i] = U[i] @ S[i]
        u[i] = tau[:, i] - pA[i] @ S[i]
        if i:
            Ia = IA[i] - U[i][:, :, None] * U[i][:, None, :] / D[i][:, None, None]
            pa = pA[i] + mv(Ia, c[i]) + U[i] * (u[i] / D[i])[:, None]
            IA[i - 1] = IA[i - 1] + X[i].mT @ Ia @ X[i]
            pA[i - 1] = pA[i - 1] + mv(X[i].mT, pa)
    qdd, a = [], a0.expand(B, 6)
    for i in range(J):                                        # pass 3: accelerations, base to tip
        a = mv(X[i], a) + c[i]
        qdd.append((u[i] - (U[i] * a).sum(-1)) / D[i])
        a = a + S[i] * qdd[i][:, None]
    return torch.stack(qdd, 1)


class Model(nn.Module):
    def __init__(self, E_tree, r_tree, axis, mass, com, I_com, gravity):
        super().__init__()
        XT, S, inertia, a0 = chain_buffers(E_tree, r_tree, axis, mass, com, I_com, gravity)
        self.register_buffer("XT", XT)
        self.register_buffer("S", S)
        self.register_buffer("inertia", inertia)
        self.register_buffer("a0", a0)

    def forward(self, q, qd, tau):                            # [B,J] each -> qdd [B,J]
        return aba(self.XT, self.S, self.inertia, self.a0, q, qd, tau)


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
    tau = 5 * torch.randn(b, j, generator=generator)
    return q.to(device), qd.to(device), tau.to(device)


def tolerance_scale(inputs, output):
    """Each sample's largest |qdd|: the joint accelerations of one chain are coupled through
    its mass matrix, so rounding in a heavy, fast joint shows up in the light ones too."""
    return output.abs().amax(-1, keepdim=True).expand_as(output)
