"""Cross-checks for robotics/l2/crba_mass_matrix: NumPy Newton-Euler columns and NumPy Cholesky."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"batch": 512, "n_joints": 24}


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


def numpy_mass_matrix_bias_cholesky(q, qd, **chain):
    chain = {k: v.double().numpy() for k, v in chain.items()}
    q, qd = q.double().numpy(), qd.double().numpy()
    B, J = q.shape
    zero = np.zeros_like(q)
    M = np.empty((B, J, J))
    for k in range(J):
        unit = zero.copy()
        unit[:, k] = 1.0
        M[:, :, k] = _rnea_world(chain, q, zero, unit, np.zeros(3))
    C = _rnea_world(chain, q, qd, zero, chain["gravity"])
    return torch.from_numpy(M), torch.from_numpy(C), torch.from_numpy(np.linalg.cholesky(M))


def test_matches_numpy_newton_euler_and_cholesky():
    case.check_against({"batch": 128, "n_joints": 7}, numpy_mass_matrix_bias_cholesky)
    case.check_against({"batch": 32, "n_joints": 16}, numpy_mass_matrix_bias_cholesky, seed=5)


def test_mass_matrix_is_symmetric_positive_definite():
    _, (M, C, L) = case.run({"batch": 256, "n_joints": 9}, dtype=torch.float64)
    torch.testing.assert_close(M, M.mT, atol=0, rtol=0)
    assert float(torch.linalg.eigvalsh(M).min()) > 0
    torch.testing.assert_close(L @ L.mT, M)
    assert bool((L.triu(1) == 0).all())


def test_degeneracy():
    case.check_degeneracy({"batch": 256, "n_joints": 7})


def test_tolerance_calibrated():
    inputs, ref32 = case.run(CALIBRATION_SHAPE)
    _, ref64 = case.run(CALIBRATION_SHAPE, dtype=torch.float64)
    scales = case.problem.tolerance_scale(inputs, ref64)
    rtols = [case.tolerance["rtol"], case.tolerance["rtol"], case.tolerance["per_output"][2]["rtol"]]
    for a, b, s, rtol in zip(ref32, ref64, scales, rtols):
        drift = float(((a.double() - b).abs() / (1 + s)).max())
        assert drift * 10 <= rtol, f"fp32 drift {drift} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
