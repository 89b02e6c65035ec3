"""Cross-checks for robotics/l1/forward_kinematics_dh: elementary-matrix NumPy loop, planar closed form."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"batch": 4096, "n_joints": 32}


def _rot_z(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def _rot_x(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1.0, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1]])


def _trans(x, y, z):
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def numpy_elementary_fk(q, dh):
    """Compose Rot_z Trans_z Trans_x Rot_x one matrix at a time, in float64."""
    q, dh = q.double().numpy(), dh.double().numpy()
    out = np.empty(q.shape + (4, 4))
    for b in range(q.shape[0]):
        frame = np.eye(4)
        for j, (a, alpha, d, offset) in enumerate(dh):
            frame = frame @ _rot_z(q[b, j] + offset) @ _trans(0, 0, d) @ _trans(a, 0, 0) @ _rot_x(alpha)
            out[b, j] = frame
    return torch.from_numpy(out)


def test_matches_numpy_elementary_matrices():
    case.check_against({"batch": 300, "n_joints": 9}, numpy_elementary_fk)


def test_planar_arm_closed_form():
    lengths = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    dh = torch.stack([lengths, torch.zeros(3), torch.zeros(3), torch.zeros(3)], -1).double()
    q = torch.tensor([[0.3, -1.1, 0.7], [math.pi / 2, 0.0, -math.pi / 2]], dtype=torch.float64)
    frames = case.problem.module.Model()(q, dh)
    cum = q.cumsum(1)
    expected_x = (lengths * cum.cos()).sum(1)
    expected_y = (lengths * cum.sin()).sum(1)
    torch.testing.assert_close(frames[:, -1, 0, 3], expected_x)
    torch.testing.assert_close(frames[:, -1, 1, 3], expected_y)
    torch.testing.assert_close(frames[:, -1, 2, 3], torch.zeros(2, dtype=torch.float64))
    # every frame is a proper rigid transform
    R = frames[..., :3, :3]
    torch.testing.assert_close(R @ R.mT, torch.eye(3, dtype=torch.float64).expand_as(R))
    assert frames[..., 3, :].tolist() == [[[0.0, 0.0, 0.0, 1.0]] * 3] * 2


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} leaves less than a 10x margin"
    assert rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(CALIBRATION_SHAPE)
