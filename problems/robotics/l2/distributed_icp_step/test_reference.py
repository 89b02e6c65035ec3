"""Cross-checks for robotics/l2/distributed_icp_step: every rank's output (gloo, 2 and 3
processes) against a float64 NumPy Gauss-Newton over all ranks' correspondences at once,
and convergence to the rigid motion the data were generated from."""
import numpy as np
import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SHAPE = {"batch": 2, "points_per_rank": 3001, "iters": 6}


def rodrigues(w):
    theta = np.linalg.norm(w)
    k = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    if theta < 1e-12:
        return np.eye(3) + k
    return np.eye(3) + np.sin(theta) / theta * k + (1 - np.cos(theta)) / theta**2 * k @ k


def numpy_icp(src, dst, nrm, w, iters):
    """One registration, all correspondences in one process, float64 throughout."""
    rot, trans, costs = np.eye(3), np.zeros(3), []
    for _ in range(iters):
        p = src @ rot.T + trans
        e = ((p - dst) * nrm).sum(1)
        jac = np.hstack([np.cross(p, nrm), nrm])
        a, g = (jac * w[:, None]).T @ jac, (jac * (w * e)[:, None]).sum(0)
        costs.append((w * e * e).sum())
        x = -np.linalg.solve(a, g)
        step = rodrigues(x[:3])
        rot, trans = step @ rot, step @ trans + x[3:]
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = rot, trans
    return pose, np.array(costs)


def single_process(shape, seed, world_size):
    shards = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    full = [torch.cat([s[i] for s in shards], 1).double().numpy() for i in range(4)]
    results = [numpy_icp(*(t[b] for t in full), shape["iters"]) for b in range(shape["batch"])]
    return (torch.tensor(np.stack([p for p, _ in results])), torch.tensor(np.stack([c for _, c in results], 1)))


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 3, w)


def test_every_rank_matches_numpy(ranks):
    w, outs = ranks
    pose64, cost64 = single_process(SHAPE, 3, w)
    for r, (pose, cost) in enumerate(outs):
        assert pose.dtype == cost.dtype == torch.float32 and pose.shape == (2, 4, 4) and cost.shape == (6, 2)
        # calibration: float32 residuals drift at least 10x inside the tolerance
        pose_err = float((pose.double() - pose64).abs().max())
        cost_err = float(((cost.double() - cost64) / cost64).abs().max())
        assert pose_err * 10 <= case.tolerance["atol"] and cost_err * 10 <= case.tolerance["rtol"], f"rank {r}"
        case.check_recorded_drift(pose_err)
        case.check_recorded_drift(cost_err, "fp32_vs_fp64_max_rel")
        assert compare_outputs((pose, cost), (pose64.float(), cost64.float()), case.tolerance).passed
        assert torch.equal(pose, outs[0][0]) and torch.equal(cost, outs[0][1]), "ranks disagree"


def test_converges_to_the_generating_motion(ranks):
    w, outs = ranks
    rot, trans = ref.true_motion(SHAPE, torch.Generator().manual_seed(3))
    pose, cost = outs[0]
    assert float((pose[:, :3, :3].double() - rot).abs().max()) < 1e-3
    assert float((pose[:, :3, 3].double() - trans).abs().max()) < 1e-3
    assert bool((cost[-1] < 1e-3 * cost[0]).all()), "the cost must fall to the noise floor"


def test_degeneracy(ranks):
    w, outs = ranks
    other = single_process(SHAPE, 4, w)
    out = outs[0]
    assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
    assert not compare_outputs(tuple(o.float() for o in other), out, case.tolerance).passed
