"""Cross-checks for robotics/l2/trajectory_collision_check: NumPy FK and closest-point box distances."""
import numpy as np
import torch
from scipy.spatial.transform import Rotation

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SMALL = {"batch": 64, "horizon": 16, "spheres": 16, "obstacles": 8}


def numpy_link_poses(q, R_f, p_f, axis):
    """4x4 pose of every link frame for one configuration."""
    T, poses = np.eye(4), []
    for j in range(len(q)):
        step = np.eye(4)
        step[:3, :3] = R_f[j] @ Rotation.from_rotvec(axis[j] * q[j]).as_matrix()
        step[:3, 3] = p_f[j]
        T = T @ step
        poses.append(T)
    return poses


def box_distance(points, centre, rotation, half):
    """Signed distance through the closest point: outside ||p - clamp(p)||, inside -(min face gap)."""
    local = (points - centre) @ rotation
    outside = np.linalg.norm(local - np.clip(local, -half, half), axis=-1)
    inside = np.all(np.abs(local) <= half, axis=-1)
    return np.where(inside, -np.min(half - np.abs(local), axis=-1), outside)


def numpy_check(q, link, local, radius, box_centre, box_rotation, box_half, R_f, p_f, axis):
    q = q.double().numpy()
    chain = [t.double().numpy() for t in (R_f, p_f, axis)]
    local_h = np.concatenate([local.double().numpy(), np.ones((len(link), 1))], 1)
    boxes = [t.double().numpy() for t in (box_centre, box_rotation, box_half)]
    B, T, _ = q.shape
    clearance = np.empty((B, T))
    for b in range(B):
        for t in range(T):
            poses = numpy_link_poses(q[b, t], *chain)
            centres = np.stack([(poses[int(l)] @ c)[:3] for l, c in zip(link, local_h)])
            dist = np.stack([box_distance(centres, *(x[o] for x in boxes)) for o in range(len(boxes[0]))])
            clearance[b, t] = (dist - radius.double().numpy()).min()
    hits = clearance < 0
    first = np.array([np.flatnonzero(h)[0] if h.any() else -1 for h in hits])
    return torch.from_numpy(clearance), torch.from_numpy(hits.any(1)), torch.from_numpy(first)


def test_matches_numpy_closest_point_distances():
    case.check_against(SMALL, numpy_check)
    shape = {**SMALL, "batch": 32, "obstacles": 3}
    inputs, (clear, colliding, first) = case.run(shape, seed=6)
    expected = numpy_check(*inputs, **case.problem.init_inputs(shape))
    assert torch.equal(colliding, expected[1]) and torch.equal(first, expected[2])


def test_inputs_mix_collision_free_and_colliding_trajectories():
    for obstacles in (8, 48):
        _, (clear, colliding, first) = case.run({**SMALL, "batch": 128, "obstacles": obstacles})
        assert 0.05 < float(colliding.double().mean()) < 0.95 and bool((first > 0).any())


def test_box_sdf_on_hand_built_points():
    rotation = torch.tensor(Rotation.from_euler("z", 90, degrees=True).as_matrix(), dtype=torch.float64)
    centre, half = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), torch.tensor([0.5, 0.2, 0.1], dtype=torch.float64)
    points = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.9, 0.0], [1.5, 0.0, 0.0], [1.5, 0.8, 0.4]], dtype=torch.float64)
    # the box's long axis is world y after the 90 degree turn
    expected = torch.tensor([-0.1, 0.4, 0.3, np.sqrt(0.3 ** 2 + 0.3 ** 2 + 0.3 ** 2)], dtype=torch.float64)
    torch.testing.assert_close(ref.box_sdf(points, centre, rotation, half), expected)


def test_check_output_accepts_near_answers_and_rejects_wrong_ones():
    inputs, (clear, colliding, first) = case.run(SMALL)
    expected, tol, check = (clear, colliding, first), case.tolerance, ref.check_output
    assert check(inputs, (clear + 5e-5, colliding, first), expected, tol)[0]
    assert not check(inputs, (clear + 1e-3, colliding, first), expected, tol)[0]
    assert not check(inputs, (clear, ~colliding, torch.where(colliding, -1, 0)), expected, tol)[0]
    later = torch.where(first >= 0, torch.clamp(first + 1, max=clear.shape[1] - 1), first)
    assert not check(inputs, (clear, colliding, later), expected, tol)[0]
    # a trajectory whose deciding clearance is within the margin of 0 may flip
    b = int(clear.min(-1).values.abs().argmin())
    near = clear.clone()
    near[b] = near[b] - near[b].min() + 5e-6                              # the reference: just clear
    near_col = (near < 0).any(-1)
    near_first = torch.where(near_col, (near < 0).int().argmax(-1), -1).long()
    flipped_col, flipped_first = near_col.clone(), near_first.clone()
    flipped_col[b], flipped_first[b] = True, int(near[b].argmin())         # the candidate: a hit
    assert check(inputs, (near, flipped_col, flipped_first), (near, near_col, near_first), tol)[0]
    flipped_first[b] = 0 if int(near[b].argmin()) else 1                    # a hit where it is not near 0
    assert not check(inputs, (near, flipped_col, flipped_first), (near, near_col, near_first), tol)[0] \
        or float(near[b, int(flipped_first[b])]) < 1e-5
    perm = torch.randperm(clear.shape[0], generator=torch.Generator().manual_seed(0))
    assert not check(inputs, (clear[perm], colliding[perm], first[perm]), expected, tol)[0]


def test_degeneracy():
    case.check_degeneracy(SMALL)


CALIBRATION_SHAPE = {"batch": 256, "horizon": 16, "spheres": 32, "obstacles": 16}


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
