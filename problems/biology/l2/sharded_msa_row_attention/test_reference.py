"""Cross-checks for biology/l2/sharded_msa_row_attention: every rank's output (gloo, 2 and 3
processes) against biology/l2/msa_row_attention_pair_bias's single-process reference (float64)
on the concatenated MSA rows, mask and pair rows."""
from pathlib import Path

import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.runner.problem import cast_floats, load_problem
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SINGLE = load_problem(Path(__file__).resolve().parents[1] / "msa_row_attention_pair_bias")
SHAPE = {"n_seq": 17, "n_res": 31}  # odd sizes: uneven shards


def single_process(shape, seed, world_size, init=None):
    shards = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    m, z, mask = (torch.cat([s[i] for s in shards], 1) for i in range(3))
    init = cast_floats(init or ref.get_init_inputs(shape), torch.float64)
    with torch.no_grad():
        out = SINGLE.module.Model(**init)(*cast_floats((m, z, mask), torch.float64))
    b = ref.bounds(shape["n_seq"], world_size)
    return [out[:, b[r]:b[r + 1]] for r in range(world_size)]


def test_same_weights_as_the_single_gpu_problem():
    mine, theirs = ref.get_init_inputs(SHAPE), SINGLE.init_inputs({"batch": 1, **SHAPE})
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 2, w)


def test_every_rank_matches_single_process(ranks):
    w, outs = ranks
    for r, (out, exp) in enumerate(zip(outs, single_process(SHAPE, 2, w))):
        assert out.dtype == torch.float32 and out.shape == exp.shape
        err = float((out.double() - exp).abs().max())
        assert err * 1000 <= case.tolerance["atol"], f"rank {r}: fp32 vs fp64 drift {err}"
        case.check_recorded_drift(err)
        assert compare_outputs(out, exp.float(), case.tolerance).passed


def test_degeneracy(ranks):
    w, outs = ranks
    init = ref.get_init_inputs(SHAPE)
    no_bias = single_process(SHAPE, 2, w, dict(init, w_b=torch.zeros_like(init["w_b"])))
    other = single_process(SHAPE, 3, w)
    for out, alt, nb in zip(outs, other, no_bias):
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs(alt.float(), out, case.tolerance).passed
        assert not compare_outputs(nb.float(), out, case.tolerance).passed, "the gathered pair bias is invisible"
