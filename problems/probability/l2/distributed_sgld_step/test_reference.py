"""Cross-checks for probability/l2/distributed_sgld_step: every rank's trajectory (gloo, 2 and
3 processes) against a single-process SGLD over all ranks' minibatches with hand-derived
float64 gradients (no autograd), itself checked by finite differences."""
import math

import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SHAPE = {"d_in": 16, "hidden": 32, "classes": 4, "batch_per_rank": 16, "steps": 10}


def nll_and_grad(theta, shapes, x, y):
    """Summed cross-entropy of the tanh MLP and its gradient, by hand."""
    w1, b1, w2, b2 = ref.unflatten(theta, shapes)
    h = torch.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    logp = logits - torch.logsumexp(logits, 1, keepdim=True)
    nll = -logp[torch.arange(len(y)), y].sum()
    dl = logp.exp()
    dl[torch.arange(len(y)), y] -= 1
    dz = (dl @ w2.T) * (1 - h * h)
    grads = [x.T @ dz, dz.sum(0), h.T @ dl, dl.sum(0)]
    return nll, torch.cat([g.reshape(-1) for g in grads])


def single_process(shape, seed, world_size):
    init = ref.get_init_inputs(shape)
    shards = [[t.double() if t.is_floating_point() else t for t in
               case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size)] for r in range(world_size)]
    shapes = ref.param_shapes(shape["d_in"], shape["hidden"], shape["classes"])
    theta, xi = shards[0][0].clone(), shards[0][4]
    b, n_total = shape["batch_per_rank"], 4 * shape["batch_per_rank"] * world_size
    traj = []
    for s in range(shape["steps"]):
        g = sum(nll_and_grad(theta, shapes, x[idx[s]], y[idx[s]])[1] for _, x, y, idx, _ in shards)
        theta = theta + init["eps"] / 2 * (-init["alpha"] * theta - n_total / (world_size * b) * g) \
            + math.sqrt(init["eps"]) * xi[s]
        traj.append(theta)
    return torch.stack(traj)


def test_hand_gradient_matches_finite_differences():
    shape = {"d_in": 5, "hidden": 4, "classes": 3}
    shapes = ref.param_shapes(**shape)
    gen = torch.Generator().manual_seed(0)
    theta = torch.randn(ref.n_params(shape), generator=gen, dtype=torch.float64)
    x, y = torch.randn(7, 5, generator=gen, dtype=torch.float64), torch.randint(0, 3, (7,), generator=gen)
    _, grad = nll_and_grad(theta, shapes, x, y)
    for k in range(0, theta.numel(), 5):
        d = torch.zeros_like(theta)
        d[k] = 1e-6
        fd = (nll_and_grad(theta + d, shapes, x, y)[0] - nll_and_grad(theta - d, shapes, x, y)[0]) / 2e-6
        assert abs(float(fd) - float(grad[k])) < 1e-6


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 11, w)


def test_every_rank_matches_single_process(ranks):
    w, outs = ranks
    expected = single_process(SHAPE, 11, w)
    for r, out in enumerate(outs):
        assert out.dtype == torch.float32 and out.shape == expected.shape == (10, ref.n_params(SHAPE))
        err = float((out.double() - expected).abs().max())
        assert err * 10 <= case.tolerance["atol"], f"rank {r}: fp32 vs fp64 drift {err}"
        case.check_recorded_drift(err)
        assert compare_outputs(out, expected.float(), case.tolerance).passed
        assert torch.equal(out, outs[0]), "ranks disagree"


def test_degeneracy(ranks):
    w, outs = ranks
    out = outs[0]
    assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
    assert not compare_outputs(single_process(SHAPE, 12, w).float(), out, case.tolerance).passed
    # the data term matters: without the gradient, the trajectory is only prior + noise
    inputs = case.problem.inputs(SHAPE, 11, "cpu", rank=0, world_size=w)
    theta, traj, init = inputs[0], [], ref.get_init_inputs(SHAPE)
    for s in range(SHAPE["steps"]):
        theta = theta + init["eps"] / 2 * (-init["alpha"] * theta) + math.sqrt(init["eps"]) * inputs[4][s]
        traj.append(theta)
    assert not compare_outputs(torch.stack(traj), out, case.tolerance).passed, "the gradient term is invisible"
