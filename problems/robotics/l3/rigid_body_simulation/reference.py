"""robotics/l3/rigid_body_simulation: T steps of a PD-controlled serial chain integrated with ABA.

B copies of the chain of robotics/l2/featherstone_aba (same ABA, same random chain) follow
sinusoidal joint references under PD control with viscous damping and joint-limit springs,
integrated by semi-implicit Euler (dt = 1e-3). Output q every 10 steps and the final qd.
"""
import math

import torch
import torch.nn as nn

DT = 1e-3
RECORD_EVERY = 10


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
    def __init__(self, E_tree, r_tree, axis, mass, com, I_com, gravity, steps: int):
        super().__init__()
        XT, S, inertia, a0 = chain_buffers(E_tree, r_tree, axis, mass, com, I_com, gravity)
        self.register_buffer("XT", XT)
        self.register_buffer("S", S)
        self.register_buffer("inertia", inertia)
        self.register_buffer("a0", a0)
        self.steps = int(steps)

    def forward(self, q0, qd0, phase, amp, omega, kp, kd, damping, limits, k_lim):
        q, qd = q0, qd0
        q_min, q_max = limits[:, 0], limits[:, 1]
        frames = []
        for n in range(self.steps):
            t = n * DT
            arg = omega * t + phase                                   # [B,J]
            q_ref, qd_ref = amp * torch.sin(arg), amp * omega * torch.cos(arg)
            limit = torch.clamp(q_min - q, min=0) - torch.clamp(q - q_max, min=0)
            tau = kp * (q_ref - q) + kd * (qd_ref - qd) - damping * qd + k_lim * limit
            qdd = aba(self.XT, self.S, self.inertia, self.a0, q, qd, tau)
            qd = qd + DT * qdd                                        # semi-implicit Euler
            q = q + DT * qd
            if (n + 1) % RECORD_EVERY == 0:
                frames.append(q)
        return torch.stack(frames, 0), qd                             # [T/10,B,J], [B,J]


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
    return {**random_chain(shape["n_joints"]), "steps": shape["steps"]}


def get_inputs(shape, generator, device):
    b, j = shape["batch"], shape["n_joints"]
    g = generator
    q0 = torch.rand(b, j, generator=g) * 2 - 1
    qd0 = torch.randn(b, j, generator=g) * 0.5
    phase = torch.rand(b, j, generator=g) * 2 * math.pi
    amp = 0.3 + 0.7 * torch.rand(j, generator=g)
    omega = 1.0 + 5.0 * torch.rand(j, generator=g)
    # stiffer joints near the base, where gravity loads accumulate
    kp = 20.0 * (j - torch.arange(j)) + 20.0 * torch.rand(j, generator=g)
    kd = kp / 20.0
    damping = 0.05 + 0.1 * torch.rand(j, generator=g)
    half_range = 0.6 + 0.8 * torch.rand(j, generator=g)   # some starts and references lie beyond a limit
    limits = torch.stack([-half_range, half_range], -1)
    k_lim = torch.tensor(100.0)
    return tuple(x.to(device) for x in (q0, qd0, phase, amp, omega, kp, kd, damping, limits, k_lim))
