"""Cross-checks for probability/l3/distributed_particle_filter: every rank's output (gloo, 2 and
3 processes) against probability/l3/particle_filter_bootstrap's single-process reference on all
ranks' particles and noise concatenated along N."""
from pathlib import Path

import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.runner.problem import load_problem
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
SINGLE = load_problem(Path(__file__).resolve().parents[1] / "particle_filter_bootstrap")
SHAPE = {"batch": 2, "n_particles": 1001, "T": 20}  # 1001: uneven blocks


def single_process(shape, seed, world_size):
    shards = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    y, _, _, u = shards[0]
    x0, v = torch.cat([s[1] for s in shards], 1), torch.cat([s[2] for s in shards], 2)
    with torch.no_grad():
        return SINGLE.module.Model()(y.double(), x0.double(), v.double(), u.double())


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 3, w)


def test_every_rank_matches_the_single_gpu_filter(ranks):
    w, outs = ranks
    means64, log_z64 = single_process(SHAPE, 3, w)
    for r, (means, log_z) in enumerate(outs):
        assert means.shape == (2, 20) and log_z.shape == (2,) and means.dtype == torch.float32
        err = max(float((means.double() - means64).abs().max()), float((log_z.double() - log_z64).abs().max()))
        assert err * 10 <= case.tolerance["atol"], f"rank {r}: drift {err}"
        case.check_recorded_drift(err)
        assert compare_outputs((means, log_z), (means64.float(), log_z64.float()), case.tolerance).passed
        assert torch.equal(means, outs[0][0]) and torch.equal(log_z, outs[0][1]), "ranks disagree"


def test_resampling_fires_and_matters(ranks):
    # the test shape resamples (ESS < N/2 happens), and a filter that never resamples differs
    w, outs = ranks
    shards = [case.problem.inputs(SHAPE, 3, "cpu", rank=r, world_size=w) for r in range(w)]
    y, _, _, u = shards[0]
    x0, v = torch.cat([s[1] for s in shards], 1), torch.cat([s[2] for s in shards], 2)
    model = SINGLE.module.Model()
    no_resampling = SINGLE.module.ESS_FRACTION
    try:
        SINGLE.module.ESS_FRACTION = 0.0
        means_nr, _ = model(y.double(), x0.double(), v.double(), u.double())
    finally:
        SINGLE.module.ESS_FRACTION = no_resampling
    assert not compare_outputs(means_nr.float(), outs[0][0], {**case.tolerance, "per_output": None}).passed


def test_degeneracy(ranks):
    w, outs = ranks
    other = single_process(SHAPE, 4, w)
    for out in outs:
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs(tuple(o.float() for o in other), out, case.tolerance).passed
