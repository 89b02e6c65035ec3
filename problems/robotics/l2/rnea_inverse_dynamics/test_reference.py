"""Cross-checks for robotics/l2/rnea_inverse_dynamics: an independent NumPy Newton-Euler."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"batch": 1024, "n_joints": 32}


def _rodrigues(axis, q):
    """[3], [B] -> [B,3,3]"""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    s, c = np.sin(q)[:, None, None], np.cos(q)[:, None, None]
    return np.eye(3) + s * K + (1 - c) * (K @ K)


def _rnea_world(chain, q, qd, qdd, gravity):
    """Joint torques by Newton-Euler about each joint origin, every vector in the base frame."""
    B, J = q.shape
    rot, pos = np.broadcast_to(np.eye(3), (B, 3, 3)), np.zeros((B, 3))
    w, dw, acc = np.zeros((B, 3)), np.zeros((B, 3)), np.broadcast_to(-gravity, (B, 3))
    frames = []
    for i in range(J):
        new_pos = pos + rot @ chain["r_tree"][i]
        arm = new_pos - pos
        acc = acc + np.cross(dw, arm) + np.cross(w, np.cross(w, arm))     # origin fixed in the parent link
        rot = rot @ chain["E_tree"][i].T @ _rodrigues(chain["axis"][i], q[:, i])
        pos = new_pos
        z = rot @ chain["axis"][i]
        w_new = w + z * qd[:, i:i + 1]
        dw = dw + z * qdd[:, i:i + 1] + np.cross(w_new, z * qd[:, i:i + 1])
        w = w_new
        com = rot @ chain["com"][i]
        acc_com = acc + np.cross(dw, com) + np.cross(w, np.cross(w, com))
        inertia = rot @ chain["I_com"][i] @ rot.transpose(0, 2, 1)
        force = chain["mass"][i] * acc_com
        Iw = np.einsum("bij,bj->bi", inertia, w)
        moment = np.einsum("bij,bj->bi", inertia, dw) + np.cross(w, Iw)
        frames.append((pos, z, com, force, moment))
    tau = np.zeros((B, J))
    f_child, n_child, p_child = np.zeros((B, 3)), np.zeros((B, 3)), None
    for i in reversed(range(J)):
        pos, z, com, force, moment = frames[i]
        n = moment + np.cross(com, force) + n_child
        if p_child is not None:
            n = n + np.cross(p_child - pos, f_child)
        f_child, n_child, p_child = force + f_child, n, pos
        tau[:, i] = (z * n).sum(-1)
    return tau


def numpy_inverse_dynamics(q, qd, qdd, **chain):
    chain = {k: v.double().numpy() for k, v in chain.items()}
    q, qd, qdd = (t.double().numpy() for t in (q, qd, qdd))
    return torch.from_numpy(_rnea_world(chain, q, qd, qdd, chain["gravity"]))


def test_matches_numpy_newton_euler():
    case.check_against({"batch": 256, "n_joints": 7}, numpy_inverse_dynamics)
    case.check_against({"batch": 64, "n_joints": 20}, numpy_inverse_dynamics, seed=5)


def test_float64_agreement_is_exact():
    """With exactly orthonormal float64 rotations the two formulations agree to rounding."""
    shape = {"batch": 64, "n_joints": 9}
    inputs, _ = case.run(shape, dtype=torch.float64)
    chain = {k: v.double() for k, v in case.problem.init_inputs(shape).items()}
    U, _, Vh = torch.linalg.svd(chain["E_tree"])
    chain["E_tree"] = U @ Vh
    chain["axis"] = chain["axis"] / chain["axis"].norm(dim=-1, keepdim=True)
    tau = case.problem.module.Model(**chain)(*inputs)
    expected = numpy_inverse_dynamics(*inputs, **chain)
    assert float((tau - expected).abs().max()) <= 1e-9 * float(expected.abs().max())


def test_static_holding_torque_is_linear_in_gravity():
    """At rest (qd = qdd = 0) the torques are pure gravity loads: doubling g doubles tau."""
    shape = {"batch": 16, "n_joints": 5}
    q, _, _ = case.run(shape, dtype=torch.float64)[0]
    chain = {k: v.double() for k, v in case.problem.init_inputs(shape).items()}
    zero = torch.zeros_like(q)
    tau1 = case.problem.module.Model(**chain)(q, zero, zero)
    tau2 = case.problem.module.Model(**{**chain, "gravity": 2 * chain["gravity"]})(q, zero, zero)
    torch.testing.assert_close(tau2, 2 * tau1)
    assert float(tau1.abs().max()) > 1.0


def test_degeneracy():
    case.check_degeneracy({"batch": 256, "n_joints": 7})


def test_tolerance_calibrated():
    inputs, ref32 = case.run(CALIBRATION_SHAPE)
    _, ref64 = case.run(CALIBRATION_SHAPE, dtype=torch.float64)
    scale = case.problem.tolerance_scale(inputs, ref64)
    drift = float(((ref32.double() - ref64).abs() / (1 + scale)).max())
    assert drift * 10 <= case.tolerance["rtol"], f"fp32 drift {drift} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
