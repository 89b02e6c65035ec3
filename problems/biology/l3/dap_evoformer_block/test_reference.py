"""Cross-checks for biology/l3/dap_evoformer_block: every rank's shards of (m', z') (gloo, 2 and 3
processes) against biology/l3/evoformer_block's single-process reference in float64 on the
concatenated inputs."""
from pathlib import Path

import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.runner.problem import cast_floats, load_problem
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SINGLE = load_problem(Path(__file__).resolve().parents[1] / "evoformer_block")
SHAPE = {"n_seq": 9, "n_res": 13}  # odd sizes: uneven shards


def single_process(shape, seed, world_size):
    shards = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    m, z, msa_mask, pair_mask = (torch.cat([s[i] for s in shards], 1) for i in range(4))
    with torch.no_grad():
        m_out, z_out = SINGLE.module.Model(**cast_floats(ref.get_init_inputs(shape), torch.float64))(
            *cast_floats((m, z, msa_mask, pair_mask), torch.float64))
    bs, br = ref.bounds(shape["n_seq"], world_size), ref.bounds(shape["n_res"], world_size)
    return [(m_out[:, bs[r]:bs[r + 1]], z_out[:, br[r]:br[r + 1]]) for r in range(world_size)]


def test_same_weights_as_the_single_gpu_problem():
    mine, theirs = ref.get_init_inputs(SHAPE), SINGLE.init_inputs({"batch": 1, **SHAPE})
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 4, w)


def test_every_rank_matches_evoformer_block(ranks):
    w, outs = ranks
    for r, (out, exp) in enumerate(zip(outs, single_process(SHAPE, 4, w))):
        assert [o.shape for o in out] == [e.shape for e in exp] and all(o.dtype == torch.float32 for o in out)
        err = max(float((o.double() - e).abs().max()) for o, e in zip(out, exp))
        assert err * 1000 <= case.tolerance["atol"], f"rank {r}: fp32 vs fp64 drift {err}"
        case.check_recorded_drift(err)
        assert compare_outputs(out, tuple(e.float() for e in exp), case.tolerance).passed


def test_degeneracy(ranks):
    w, outs = ranks
    for out, alt in zip(outs, single_process(SHAPE, 5, w)):
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs(tuple(a.float() for a in alt), out, case.tolerance).passed
