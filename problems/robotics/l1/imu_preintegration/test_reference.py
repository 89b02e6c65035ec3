"""Cross-checks for robotics/l1/imu_preintegration: SciPy rotations in a NumPy loop, closed forms."""
import numpy as np
import torch
from scipy.spatial.transform import Rotation

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_preintegration(gyro, accel, bias, dt):
    gyro, accel, bias, dt = gyro.double().numpy(), accel.double().numpy(), bias.double().numpy(), float(dt)
    B, T, _ = gyro.shape
    R = np.broadcast_to(np.eye(3), (B, 3, 3)).copy()
    v, p = np.zeros((B, 3)), np.zeros((B, 3))
    for k in range(T):
        a = np.einsum("bij,bj->bi", R, accel[:, k] - bias[:, 3:])
        p = p + v * dt + 0.5 * a * dt ** 2
        v = v + a * dt
        R = R @ Rotation.from_rotvec((gyro[:, k] - bias[:, :3]) * dt).as_matrix()
    return torch.from_numpy(R), torch.from_numpy(v), torch.from_numpy(p)


def test_matches_scipy_rotations():
    case.check_against({"batch": 512, "T": 120}, scipy_preintegration)


def test_constant_rate_closed_forms():
    T, dt = 400, torch.tensor(0.005, dtype=torch.float64)
    omega = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    a = torch.tensor([0.5, -1.0, 9.81], dtype=torch.float64)
    gyro = torch.stack([omega.expand(T, 3), torch.zeros(T, 3, dtype=torch.float64)])
    accel = a.expand(2, T, 3)
    bias = torch.zeros(2, 6, dtype=torch.float64)
    R, v, p = case.problem.module.Model()(gyro, accel, bias, dt)
    expected_R = torch.from_numpy(Rotation.from_rotvec((omega * T * dt).numpy()).as_matrix())
    torch.testing.assert_close(R[0], expected_R)
    torch.testing.assert_close(R[1], torch.eye(3, dtype=torch.float64))          # |phi| < 1e-6 branch
    torch.testing.assert_close(v[1], a * T * dt)
    torch.testing.assert_close(p[1], a * (T * dt) ** 2 / 2)


def test_degeneracy():
    case.check_degeneracy({"batch": 1024, "T": 50})


def test_tolerance_calibrated():
    shape = {"batch": 256, "T": 400}
    inputs, ref32 = case.run(shape)
    _, ref64 = case.run(shape, dtype=torch.float64)
    assert float((ref32[0].double() - ref64[0]).abs().max()) * 10 <= case.tolerance["per_output"][0]["atol"]
    for a, b in zip(ref32[1:], ref64[1:]):
        assert float(((a.double() - b).abs() / (1 + b.abs())).max()) * 10 <= case.tolerance["rtol"]
    case.check_calibration(shape)
