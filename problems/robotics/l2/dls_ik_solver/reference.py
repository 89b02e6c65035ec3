"""robotics/l2/dls_ik_solver: batched damped-least-squares inverse kinematics, fixed iterations.

The chain is the URDF-style chain of robotics/l2/geometric_jacobian (same construction,
same seed): T_j = T_{j-1} [R_f,j, p_f,j] Rot(a_j, q_j), T_E = T_J T_ee. Each iteration
computes FK and the geometric Jacobian, the pose error e = [p_t - p_E; Log(R_t R_E^T)]
(world frame), and the step dq = J^T (J J^T + lambda^2 I_6)^-1 e, then clamps q to the
joint limits. The outputs are q after K iterations and ||e|| at that q.
"""
import math

import torch
import torch.nn as nn

DAMPING = 0.05                # lambda
SMALL_ANGLE = 1e-3            # below: theta / (2 sin theta) by its Taylor series
NEAR_PI = math.pi - 0.05      # above: the axis from the symmetric part of R


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


def kinematics(q, R_f, p_f, axis, T_ee):
    """End-effector position [B,3], rotation [B,3,3] and geometric Jacobian [B,6,J]."""
    B, J = q.shape
    R = torch.eye(3, dtype=q.dtype, device=q.device).expand(B, 3, 3)
    p = torch.zeros(B, 3, dtype=q.dtype, device=q.device)
    z, o = [], []
    for j in range(J):
        p = p + R @ p_f[j]
        R = R @ R_f[j] @ rodrigues(axis[j], q[:, j])
        z.append(R @ axis[j])
        o.append(p)
    p_E = p + R @ T_ee[:3, 3]
    R_E = R @ T_ee[:3, :3]
    z, o = torch.stack(z, -1), torch.stack(o, -1)                               # [B,3,J]
    jacobian = torch.cat([torch.linalg.cross(z, p_E[:, :, None] - o, dim=1), z], 1)
    return p_E, R_E, jacobian


def so3_log(R: torch.Tensor) -> torch.Tensor:
    """Axis-angle vector of rotations [B,3,3], theta in [0, pi]."""
    w = torch.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], -1)  # 2 sin(t) a
    sin = w.norm(dim=-1) / 2
    cos = (R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2] - 1) / 2
    theta = torch.atan2(sin, cos)
    factor = torch.where(theta < SMALL_ANGLE, 0.5 + theta * theta / 12,
                         theta / (2 * sin.clamp_min(torch.finfo(R.dtype).tiny)))
    regular = factor[:, None] * w
    # near pi: (R + R^T)/2 - cos I = (1 - cos) a a^T; take the column of the largest diagonal
    M = ((R + R.mT) / 2 - cos[:, None, None] * torch.eye(3, dtype=R.dtype, device=R.device)) \
        / (1 - cos).clamp_min(1.0)[:, None, None]
    k = torch.diagonal(M, dim1=1, dim2=2).argmax(-1)
    column = torch.gather(M, 2, k[:, None, None].expand(-1, 3, 1))[..., 0]
    a = column / column.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(R.dtype).tiny)
    a = torch.where((a * w).sum(-1, keepdim=True) < 0, -a, a)
    return torch.where((theta > NEAR_PI)[:, None], theta[:, None] * a, regular)


def pose_error(targets, p_E, R_E):
    return torch.cat([targets[:, :3, 3] - p_E, so3_log(targets[:, :3, :3] @ R_E.mT)], -1)


class Model(nn.Module):
    def __init__(self, R_f, p_f, axis, T_ee, iters: int):
        super().__init__()
        self.register_buffer("R_f", R_f)          # [J,3,3] fixed parent -> joint rotation
        self.register_buffer("p_f", p_f)          # [J,3]   fixed parent -> joint offset
        self.register_buffer("axis", axis)        # [J,3]   unit joint axis in the joint frame
        self.register_buffer("T_ee", T_ee)        # [4,4]   last joint -> end effector
        self.iters = iters

    def forward(self, q0, targets, limits):       # [B,J], [B,4,4], [J,2] -> (q [B,J], ||e|| [B])
        chain = (self.R_f, self.p_f, self.axis, self.T_ee)
        q = q0
        damping = DAMPING ** 2 * torch.eye(6, dtype=q0.dtype, device=q0.device)
        for _ in range(self.iters):
            p_E, R_E, jac = kinematics(q, *chain)
            e = pose_error(targets, p_E, R_E)
            L = torch.linalg.cholesky(jac @ jac.mT + damping)
            dq = (jac.mT @ torch.cholesky_solve(e[:, :, None], L))[:, :, 0]
            q = torch.clamp(q + dq, limits[:, 0], limits[:, 1])
        p_E, R_E, _ = kinematics(q, *chain)
        return q, pose_error(targets, p_E, R_E).norm(dim=-1)


def _random_rotations(n: int, g: torch.Generator) -> torch.Tensor:
    Q = torch.linalg.qr(torch.randn(n, 3, 3, generator=g, dtype=torch.float64))[0]
    return Q * torch.linalg.det(Q)[:, None, None]


def chain_for(n_joints: int) -> dict:
    """The robotics/l2/geometric_jacobian chain (identical construction and seed), float32."""
    g = torch.Generator().manual_seed(0)
    axis = torch.randn(n_joints, 3, generator=g, dtype=torch.float64)
    T_ee = torch.eye(4, dtype=torch.float64)
    T_ee[:3, :3] = _random_rotations(1, g)[0]
    T_ee[:3, 3] = torch.randn(3, generator=g, dtype=torch.float64) * 0.1
    chain = dict(
        R_f=_random_rotations(n_joints, g),
        p_f=torch.randn(n_joints, 3, generator=g, dtype=torch.float64) * 0.2,
        axis=axis / axis.norm(dim=-1, keepdim=True),
        T_ee=T_ee,
    )
    return {k: v.float() for k, v in chain.items()}


def get_init_inputs(shape):
    return {**chain_for(shape["n_joints"]), "iters": int(shape["iters"])}


MIN_SINGULAR_VALUE = 0.05
START_NOISE = 0.05            # radians: q0 = clamp(q* + N(0, START_NOISE^2))
BEYOND_FRACTION = 0.5         # targets that need J - 4 joints past a limit: solved best-effort, a residual stays
BEYOND_MIN, BEYOND_MAX = 0.01, 0.05


def get_inputs(shape, generator, device):
    B, J = shape["batch"], shape["n_joints"]
    chain = {k: v.double() for k, v in chain_for(J).items()}
    half = 1.8 + 1.3 * torch.rand(J, 2, generator=generator, dtype=torch.float64)
    limits = torch.stack([-half[:, 0], half[:, 1]], -1)                         # [J,2], lo < 0 < hi
    inner_lo, inner_hi = 0.95 * limits[:, 0], 0.95 * limits[:, 1]
    n_beyond = max(J - 4, 1)
    q_star = torch.empty(B, J, dtype=torch.float64)
    todo = torch.arange(B)
    for _ in range(50):                                                          # reject near-singular targets
        draw = inner_lo + (inner_hi - inner_lo) * torch.rand(B, J, generator=generator, dtype=torch.float64)
        beyond = torch.rand(B, generator=generator) < BEYOND_FRACTION
        joints = torch.rand(B, J, generator=generator).argsort(-1)[:, :n_beyond]
        upper = torch.rand(B, n_beyond, generator=generator) < 0.5
        excess = BEYOND_MIN + (BEYOND_MAX - BEYOND_MIN) * torch.rand(B, n_beyond, generator=generator, dtype=torch.float64)
        past = torch.where(upper, limits[joints, 1] + excess, limits[joints, 0] - excess)
        draw = torch.where(beyond[:, None], draw.scatter(1, joints, past), draw)
        cand = draw[: todo.numel()]
        _, _, jac = kinematics(cand, **chain)
        ok = torch.linalg.eigvalsh(jac @ jac.mT)[:, 0] >= MIN_SINGULAR_VALUE ** 2   # sigma_min(J)^2, J >= 6
        q_star[todo[ok]] = cand[ok]
        todo = todo[~ok]
        if todo.numel() == 0:
            break
    assert todo.numel() == 0, "could not draw well-conditioned targets"
    p_E, R_E, _ = kinematics(q_star, **chain)
    targets = torch.zeros(B, 4, 4, dtype=torch.float64)
    targets[:, :3, :3], targets[:, :3, 3], targets[:, 3, 3] = R_E, p_E, 1.0
    noise = START_NOISE * torch.randn(B, J, generator=generator, dtype=torch.float64)
    q0 = torch.minimum(torch.maximum(q_star + noise, limits[:, 0]), limits[:, 1])
    return tuple(t.float().to(device) for t in (q0, targets, limits))


def check_output(inputs, output, expected, tolerance):
    """q within atol + rtol |q_ref| of the reference on at least `fraction` of the samples
    (a rare sample can wander chaotically, so a few may differ), and on those samples the
    reported final ||e|| <= reference + per_output[1].atol + rtol reference. On every sample
    the reported ||e|| must be the pose error at the returned q (recomputed in float64)."""
    q0, targets, limits = inputs
    q, err = output
    q_ref, err_ref = (t.to(q.device) for t in expected)
    atol, rtol = float(tolerance["atol"]), float(tolerance["rtol"])
    err_atol = float(tolerance["per_output"][1]["atol"])
    close = ((q - q_ref).abs() <= atol + rtol * q_ref.abs()).all(-1)
    frac, need = float(close.double().mean()), float(tolerance.get("fraction", 1.0))
    if frac < need:
        return False, f"q: {frac:.5f} of samples within atol={atol:g} rtol={rtol:g} of the reference (need {need})"
    worse = close & (err > err_ref + err_atol + rtol * err_ref)
    if bool(worse.any()):
        return False, f"final ||e||: {int(worse.sum())} samples exceed the reference's by more than {err_atol:g} + {rtol:g} ||e||"
    chain = {k: v.double().to(q.device) for k, v in chain_for(q.shape[1]).items()}
    p_E, R_E, _ = kinematics(q.double(), **chain)
    actual = pose_error(targets.double(), p_E, R_E).norm(dim=-1)
    wrong = (err.double() - actual).abs() > err_atol + rtol * actual
    if bool(wrong.any()):
        return False, f"final ||e||: {int(wrong.sum())} samples report a value that is not the pose error at their q"
    return True, f"q: {frac:.5f} of samples within atol={atol:g}; ||e|| consistent and not worse"
