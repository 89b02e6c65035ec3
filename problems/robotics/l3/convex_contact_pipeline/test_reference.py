"""Cross-checks for robotics/l3/convex_contact_pipeline: all-pairs NumPy SAT, LP intersection tests."""
import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from orchestrator.testing import ProblemCase, to_device

case = ProblemCase.load(__file__)
module = case.problem.module
SMALL_SHAPE = {"n_bodies": 300, "verts": 12, "packing": 0.3}
CALIBRATION_SHAPE = {"n_bodies": 1500, "verts": 16, "packing": 0.4}


def numpy_all_pairs_sat(template_vertices, template_normals, template_edges, template_id, rotation, translation):
    tv, tn, te, tid, R, t = (x.double().numpy() if x.is_floating_point() else x.numpy()
                             for x in (template_vertices, template_normals, template_edges, template_id, rotation, translation))
    pairs, depths, normals = [], [], []
    for i in range(len(tid)):
        for j in range(i + 1, len(tid)):
            a = tv[tid[i]] @ R[i].T + t[i]
            b = tv[tid[j]] @ R[j].T + t[j]
            if (a.min(0) > b.max(0)).any() or (b.min(0) > a.max(0)).any():
                continue
            ea, eb = te[tid[i]] @ R[i].T, te[tid[j]] @ R[j].T
            axes = [tn[tid[i]] @ R[i].T, tn[tid[j]] @ R[j].T]
            for u in ea:
                for v in eb:
                    c = np.cross(u, v)
                    if np.linalg.norm(c) >= 1e-6:
                        axes.append(c[None] / np.linalg.norm(c))
            axes = np.concatenate(axes)
            pa, pb = a @ axes.T, b @ axes.T
            overlap = np.minimum(pa.max(0) - pb.min(0), pb.max(0) - pa.min(0))
            k = int(np.argmin(overlap))
            if overlap[k] > 0:
                n = axes[k] if axes[k] @ (t[j] - t[i]) >= 0 else -axes[k]
                pairs.append((i, j))
                depths.append(overlap[k])
                normals.append(n)
    return torch.tensor(pairs), torch.tensor(depths), torch.tensor(np.array(normals))


def halfspaces(vertices, normals):
    """A x <= b of a convex polyhedron from its outward face normals and vertices."""
    return normals, (vertices @ normals.T).max(0)


def interior_margin(A1, b1, A2, b2):
    """max s such that some x has A x + s <= b for both bodies (> 0: the interiors intersect)."""
    A = np.vstack([A1, A2])
    res = linprog(c=[0, 0, 0, -1], A_ub=np.hstack([A, np.ones((len(A), 1))]), b_ub=np.concatenate([b1, b2]),
                  bounds=[(None, None)] * 3 + [(None, 1.0)], method="highs")
    return -res.fun


def test_matches_all_pairs_numpy_sat():
    case.check_against(SMALL_SHAPE, numpy_all_pairs_sat)


def test_linear_programs_confirm_contacts_depths_and_normals():
    inputs, (pairs, depth, normal) = case.run(SMALL_SHAPE)
    tv, tn, _, tid, R, t = (x.double().numpy() if x.is_floating_point() else x.numpy() for x in inputs)
    rng = np.random.default_rng(0)
    directions = rng.standard_normal((2000, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    for k in rng.choice(len(pairs), 40, replace=False):
        i, j = pairs[k].tolist()
        d, n = float(depth[k]), normal[k].double().numpy()
        a, b = tv[tid[i]] @ R[i].T + t[i], tv[tid[j]] @ R[j].T + t[j]
        A1, b1 = halfspaces(a, tn[tid[i]] @ R[i].T)
        A2, b2 = halfspaces(b, tn[tid[j]] @ R[j].T)
        assert interior_margin(A1, b1, A2, b2) > 0
        moved_apart = b2 + A2 @ n * (d + 1e-5)              # body j translated by (depth + 1e-5) n
        assert interior_margin(A1, b1, A2, moved_apart) < 0
        moved_less = b2 + A2 @ n * (d - 1e-3)
        assert interior_margin(A1, b1, A2, moved_less) > 0
        pa, pb = a @ directions.T, b @ directions.T         # no direction overlaps less than the depth
        assert np.minimum(pa.max(0) - pb.min(0), pb.max(0) - pa.min(0)).min() >= d - 1e-6


def test_some_contacts_are_edge_edge():
    inputs, (pairs, depth, normal) = case.run(SMALL_SHAPE)
    tn, tid, R = inputs[1], inputs[3], inputs[4]
    i, j = pairs.unbind(1)
    faces = torch.cat([tn[tid[i]] @ R[i].transpose(1, 2), tn[tid[j]] @ R[j].transpose(1, 2)], 1)
    along_a_face = ((faces * normal[:, None]).sum(-1).abs() > 1 - 1e-5).any(-1)
    assert 0 < int((~along_a_face).sum()) < len(pairs)


def test_hand_made_boxes():
    cube = torch.tensor([[x, y, z] for z in (-0.5, 0.5) for x, y in ((-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5))])
    normals = torch.tensor([[0.0, -1, 0], [1, 0, 0], [0, 1, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1]])
    edges = torch.tensor([[1.0, 0, 0], [0, 1, 0], [-1, 0, 0], [0, -1, 0], [0, 0, 1]])
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    rot_z = torch.tensor([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=torch.float32)
    rot_x = torch.tensor([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=torch.float32)
    rotation = torch.stack([torch.eye(3), torch.eye(3), torch.eye(3), rot_z, rot_x])
    translation = torch.tensor([[0.0, 0, 0], [0.9, 0, 0], [10, 0, 0], [10.0, 1.2, 0], [20, 0, 0]])
    pairs, depth, normal = module.Model()(cube[None], normals[None], edges[None], torch.zeros(5, dtype=torch.long),
                                          rotation, translation)
    # 0-1: faces overlap by 0.1 along +x; 2-3: a 45-degree box's corner edge reaches 0.5 + 0.707 - 1.2 into it
    assert pairs.tolist() == [[0, 1], [2, 3]]
    torch.testing.assert_close(depth, torch.tensor([0.1, 0.5 + 2 ** -0.5 - 1.2]), atol=1e-6, rtol=0)
    torch.testing.assert_close(normal, torch.tensor([[1.0, 0, 0], [0, 1, 0]]), atol=1e-6, rtol=0)


def test_checker_accepts_small_errors_and_rejects_wrong_answers():
    inputs, (pairs, depth, normal) = case.run(SMALL_SHAPE)
    expected, tol = (pairs, depth, normal), case.tolerance
    nudged = torch.nn.functional.normalize(normal + 2e-5, dim=-1)
    ok, msg = module.check_output(inputs, (pairs, depth + 2e-6, nudged), expected, tol)
    assert ok, msg
    assert not module.check_output(inputs, (pairs, depth + 1e-4, normal), expected, tol)[0]
    assert not module.check_output(inputs, (pairs, depth, normal.roll(1, 0)), expected, tol)[0]
    assert not module.check_output(inputs, (pairs, depth, -normal), expected, tol)[0]
    assert not module.check_output(inputs, (pairs.roll(1, 0), depth.roll(1, 0), normal.roll(1, 0)), expected, tol)[0]
    shallow = depth.argmin()                              # a missing deep contact fails, a near-zero one would not
    keep = torch.arange(len(depth)) != depth.argmax()
    assert not module.check_output(inputs, (pairs[keep], depth[keep], normal[keep]), expected, tol)[0]
    assert float(depth[shallow]) < float(depth.max())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_checker_judges_output_on_the_cpu_against_a_gpu_reference():
    """Issue 5: the harness hands check_output the candidate's output on the CPU, the inputs
    and the reference output on the GPU; the checker must judge it (not raise on devices),
    including the float64 re-projection of normals that differ from the reference's."""
    inputs, (pairs, depth, normal) = case.run(SMALL_SHAPE)
    inputs_gpu, expected_gpu = to_device(inputs, "cuda"), to_device((pairs, depth, normal), "cuda")
    ok, msg = module.check_output(inputs_gpu, (pairs, depth + 2e-6, normal), expected_gpu, case.tolerance)
    assert ok, msg
    verdict, msg = module.check_output(inputs_gpu, (pairs, depth, normal.roll(1, 0)), expected_gpu, case.tolerance)
    assert not verdict and "normals" in msg, msg


def test_degeneracy():
    case.check_degeneracy(SMALL_SHAPE)


def test_tolerance_calibrated():
    case.check_calibration(CALIBRATION_SHAPE)
