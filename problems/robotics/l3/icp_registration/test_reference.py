"""Cross-checks for robotics/l3/icp_registration: a SciPy k-d tree ICP, exact pose recovery."""
import numpy as np
import torch
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
module = case.problem.module
CALIBRATION_SHAPE = {"batch": 1, "n_src": 2048, "n_dst": 2048, "iters": 10}
SMALL_SHAPE = {"batch": 2, "n_src": 1024, "n_dst": 1024, "iters": 5}


def scipy_icp(src, dst, normals, d_max, iters):
    poses, rmses, counts = [], [], []
    for p0, q_all, n_all in zip(*(t.double().numpy() for t in (src, dst, normals))):
        tree = cKDTree(q_all)
        pose = np.eye(4)
        for _ in range(iters):
            p = p0 @ pose[:3, :3].T + pose[:3, 3]
            dist, idx = tree.query(p)
            keep = dist < float(d_max)
            p, q, n = p[keep], q_all[idx[keep]], n_all[idx[keep]]
            r = ((p - q) * n).sum(1)
            J = np.hstack([np.cross(p, n), n])
            x = -np.linalg.solve(J.T @ J + 1e-9 * np.eye(6), J.T @ r)
            step = np.eye(4)
            step[:3, :3] = Rotation.from_rotvec(x[:3]).as_matrix()
            step[:3, 3] = x[3:]
            pose = step @ pose
        poses.append(pose)
        rmses.append(np.sqrt((r * r).sum() / keep.sum()))
        counts.append(int(keep.sum()))
    return torch.tensor(np.array(poses)), torch.tensor(rmses), torch.tensor(counts)


def test_matches_scipy_kdtree_icp():
    case.check_against({"batch": 2, "n_src": 2048, "n_dst": 1024, "iters": 6}, scipy_icp)


def test_recovers_the_true_pose_from_noise_free_points():
    g = torch.Generator().manual_seed(5)
    spheres = torch.tensor([[0.2, -0.3, 0.4, 0.25], [-0.4, 0.3, 0.3, 0.15]])
    dst, normals = module.sample_scene(1500, spheres, g)
    R = module.so3_exp(torch.tensor([0.05, -0.08, 0.1]))
    t = torch.tensor([0.03, -0.02, 0.04])
    src = (dst - t) @ R                                  # exact copies of dst, moved by the inverse pose
    pose, rmse, count = module.Model(iters=6)(src[None], dst[None], normals[None], torch.tensor(0.3))
    torch.testing.assert_close(pose[0, :3, :3], R, atol=2e-5, rtol=0)
    torch.testing.assert_close(pose[0, :3, 3], t, atol=2e-5, rtol=0)
    assert int(count) == 1500 and float(rmse) < 1e-5


def test_nearest_neighbour_ties_go_to_the_lower_index():
    q = torch.tensor([[[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0]]])
    q = torch.cat([q, torch.full((1, 2046, 3), 9.0), torch.tensor([[[0, -1.0, 0]]])], 1)   # a tie in the 2nd chunk
    idx, d2 = module.nearest_neighbours(torch.zeros(1, 1, 3), q)
    assert int(idx) == 0 and float(d2) == 1.0


def test_checker_accepts_small_errors_and_rejects_wrong_answers():
    inputs, (pose, rmse, count) = case.run(SMALL_SHAPE)
    tol = case.tolerance
    ok, msg = module.check_output(inputs, (pose + 2e-5, rmse * (1 + 2e-5), count), (pose, rmse, count), tol)
    assert ok, msg
    assert not module.check_output(inputs, (pose + 5e-4, rmse, count), (pose, rmse, count), tol)[0]
    assert not module.check_output(inputs, (pose, rmse, count - 10), (pose, rmse, count), tol)[0]
    assert not module.check_output(inputs, (pose, rmse * 1.01, count), (pose, rmse, count), tol)[0]
    assert not module.check_output(inputs, (pose.flip(0), rmse.flip(0), count.flip(0)), (pose, rmse, count), tol)[0]


def test_degeneracy():
    case.check_degeneracy(SMALL_SHAPE)


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
