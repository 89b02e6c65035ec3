"""Cross-checks for robotics/l2/dls_ik_solver: an independent NumPy/SciPy solver in float64."""
import numpy as np
import torch
from scipy.spatial.transform import Rotation

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SMALL = {"batch": 128, "iters": 5, "n_joints": 7}


def _homogeneous(R, p):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def numpy_fk(q, R_f, p_f, axis, T_ee):
    """End-effector 4x4 pose and the world joint axes and origins, from 4x4 products."""
    T, axes, origins = np.eye(4), [], []
    for j in range(len(q)):
        T = T @ _homogeneous(R_f[j], p_f[j])
        origins.append(T[:3, 3].copy())
        T = T @ _homogeneous(Rotation.from_rotvec(axis[j] * q[j]).as_matrix(), np.zeros(3))
        axes.append(T[:3, :3] @ axis[j])
    return T @ T_ee, axes, origins


def numpy_dls(q0, targets, limits, R_f, p_f, axis, T_ee, iters):
    chain = [t.double().numpy() for t in (R_f, p_f, axis, T_ee)]
    q_all, targets, limits = q0.double().numpy().copy(), targets.double().numpy(), limits.double().numpy()
    errors = np.empty(len(q_all))

    def error(q, target):
        T, axes, origins = numpy_fk(q, *chain)
        rot = Rotation.from_matrix(target[:3, :3] @ T[:3, :3].T).as_rotvec()
        return np.concatenate([target[:3, 3] - T[:3, 3], rot]), T, axes, origins

    for b, q in enumerate(q_all):
        for _ in range(iters):
            e, T, axes, origins = error(q, targets[b])
            jac = np.stack([np.concatenate([np.cross(z, T[:3, 3] - o), z]) for z, o in zip(axes, origins)], 1)
            dq = jac.T @ np.linalg.solve(jac @ jac.T + 0.05 ** 2 * np.eye(6), e)
            q = np.clip(q + dq, limits[:, 0], limits[:, 1])
        q_all[b] = q
        errors[b] = np.linalg.norm(error(q, targets[b])[0])
    return torch.from_numpy(q_all), torch.from_numpy(errors)


def test_matches_numpy_scipy_solver():
    case.check_against({"batch": 24, "iters": 20, "n_joints": 7}, numpy_dls)
    case.check_against({"batch": 8, "iters": 8, "n_joints": 12}, numpy_dls, seed=4)


def test_so3_log_matches_scipy_including_small_and_near_pi_angles():
    g = torch.Generator().manual_seed(0)
    axis = torch.nn.functional.normalize(torch.randn(600, 3, generator=g, dtype=torch.float64), dim=-1)
    angle = torch.cat([3.1 * torch.rand(300, generator=g, dtype=torch.float64),
                       1e-4 * torch.rand(100, generator=g, dtype=torch.float64),
                       torch.pi - 0.05 * torch.rand(200, generator=g, dtype=torch.float64)])
    rotvec = axis * angle[:, None]
    R = torch.from_numpy(Rotation.from_rotvec(rotvec.numpy()).as_matrix())
    torch.testing.assert_close(ref.so3_log(R), rotvec, atol=1e-12, rtol=0)
    torch.testing.assert_close(ref.so3_log(R.float()), rotvec.float(), atol=1e-5, rtol=0)


def test_reachable_targets_converge_and_the_others_keep_a_residual_at_a_limit():
    shape = {"batch": 512, "iters": 20, "n_joints": 7}
    (q0, targets, limits), (q, err) = case.run(shape)
    converged, residual = err < 1e-4, err > 1e-3
    assert 0.35 < float(converged.double().mean()) < 0.65 and 0.35 < float(residual.double().mean()) < 0.65
    at_limit = ((q == limits[:, 0]) | (q == limits[:, 1])).sum(-1)
    assert bool((at_limit[residual] >= 1).all()), "a best-effort solution presses against joint limits"
    assert bool(((q >= limits[:, 0]) & (q <= limits[:, 1])).all())
    chain = ref.chain_for(7)
    _, _, jac = ref.kinematics(q.double(), **{k: v.double() for k, v in chain.items()})
    assert float(torch.linalg.svdvals(jac)[:, -1].min()) > 0.01


def test_check_output_accepts_near_answers_and_rejects_wrong_ones():
    inputs, (q, err) = case.run(SMALL)
    tol, check = case.tolerance, ref.check_output
    def with_error(q_new):
        chain = {k: v.double() for k, v in ref.chain_for(q.shape[1]).items()}
        p_E, R_E, _ = ref.kinematics(q_new.double(), **chain)
        return q_new, ref.pose_error(inputs[1].double(), p_E, R_E).norm(dim=-1).float()

    sign = torch.where(torch.arange(q.numel()).reshape(q.shape) % 2 == 0, 1.0, -1.0)
    assert check(inputs, with_error(q + 1e-5 * sign), (q, err), tol)[0]
    assert not check(inputs, with_error(q + 5e-3 * sign), (q, err), tol)[0]
    assert not check(inputs, with_error(q + 3e-4 * sign), (q, err), tol)[0], "||e|| worse by more than 1e-4"
    assert not check(inputs, (q, torch.zeros_like(err)), (q, err), tol)[0], "err must be the error at q"
    assert not check(inputs, (q[torch.randperm(len(q))], err), (q, err), tol)[0]
    model = ref.Model(**case.problem.init_inputs({**SMALL, "iters": 4}))
    assert not check(inputs, model(*inputs), (q, err), tol)[0], "one iteration fewer must fail"


def test_degeneracy():
    case.check_degeneracy(SMALL)


CALIBRATION_SHAPE = {"batch": 2048, "iters": 20, "n_joints": 7}


def test_tolerance_calibrated():
    _, (q32, err32) = case.run(CALIBRATION_SHAPE)
    _, (q64, err64) = case.run(CALIBRATION_SHAPE, dtype=torch.float64)
    drift = (q32.double() - q64).abs().max(-1).values
    assert float((drift * 10 <= case.tolerance["atol"]).double().mean()) >= case.tolerance["fraction"]
    case.check_calibration(CALIBRATION_SHAPE)
