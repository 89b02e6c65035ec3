"""Cross-checks for robotics/l2/geometric_jacobian: finite differences of an independent NumPy FK."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"batch": 4096, "n_joints": 16}


def _homogeneous(R, p):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def _axis_angle(axis, angle):
    """exp([axis]x angle) through the matrix exponential series of scipy-free NumPy (Rodrigues)."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def numpy_end_effector(q, R_f, p_f, axis, T_ee):
    """T_E for one configuration q [J], composing 4x4 homogeneous matrices."""
    T = np.eye(4)
    for j in range(len(q)):
        T = T @ _homogeneous(R_f[j], p_f[j]) @ _homogeneous(_axis_angle(axis[j], q[j]), np.zeros(3))
    return T @ T_ee


def numpy_jacobian(q, R_f, p_f, axis, T_ee, step=1e-6):
    q = q.double().numpy()
    chain = [t.double().numpy() for t in (R_f, p_f, axis, T_ee)]
    B, J = q.shape
    jac, poses = np.empty((B, 6, J)), np.empty((B, 4, 4))
    for b in range(B):
        T = numpy_end_effector(q[b], *chain)
        poses[b] = T
        for j in range(J):
            dq = np.zeros(J)
            dq[j] = step
            plus, minus = numpy_end_effector(q[b] + dq, *chain), numpy_end_effector(q[b] - dq, *chain)
            jac[b, :3, j] = (plus[:3, 3] - minus[:3, 3]) / (2 * step)
            W = (plus[:3, :3] - minus[:3, :3]) / (2 * step) @ T[:3, :3].T     # [omega]x
            jac[b, 3:, j] = (W[2, 1], W[0, 2], W[1, 0])
    return torch.from_numpy(jac), torch.from_numpy(poses)


def test_matches_finite_differences_of_numpy_fk():
    case.check_against({"batch": 64, "n_joints": 7}, numpy_jacobian)
    case.check_against({"batch": 16, "n_joints": 16}, numpy_jacobian, seed=3)


def test_angular_rows_are_unit_axes_and_pose_is_rigid():
    _, (jac, T_E) = case.run({"batch": 256, "n_joints": 5})
    torch.testing.assert_close(jac[:, 3:].norm(dim=1), torch.ones(256, 5))
    R = T_E[:, :3, :3]
    torch.testing.assert_close(R @ R.mT, torch.eye(3).expand(256, 3, 3), atol=1e-5, rtol=0)
    assert T_E[:, 3].eq(torch.tensor([0.0, 0.0, 0.0, 1.0])).all()


def test_degeneracy():
    case.check_degeneracy({"batch": 256, "n_joints": 7})


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
