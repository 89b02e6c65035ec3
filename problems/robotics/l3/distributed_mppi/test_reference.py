"""Cross-checks for robotics/l3/distributed_mppi: every rank's output (gloo, 2 and 3 processes)
against robotics/l3/mppi_controller's single-process reference on the concatenated noise."""
from pathlib import Path

import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.runner.problem import cast_floats, load_problem
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SINGLE = load_problem(Path(__file__).resolve().parents[1] / "mppi_controller")
SHAPE = {"envs": 2, "samples": 511, "horizon": 16, "obstacles": 4, "iters": 2}  # 511: uneven split


def single_process(shape, seed, world_size):
    shards = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    inputs = list(shards[0])
    inputs[5] = torch.cat([s[5] for s in shards], 2)  # all ranks' samples along K
    with torch.no_grad():
        U, S, _ = SINGLE.module.Model()(*cast_floats(tuple(inputs), torch.float64))
    b = ref.sample_bounds(shape["samples"], world_size)
    return U, [S[:, b[r]:b[r + 1]] for r in range(world_size)]


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 9, w)


def _rel(a, b):
    return float((a.double() - b).norm() / b.norm())


def test_every_rank_matches_single_process(ranks):
    w, outs = ranks
    U64, S64 = single_process(SHAPE, 9, w)
    tol_u, tol_s = (o["rel_norm"] for o in case.tolerance["per_output"])
    for r, (U, S) in enumerate(outs):
        assert U.shape == (2, 16, 2) and S.shape == S64[r].shape and U.dtype == S.dtype == torch.float32
        assert _rel(U, U64) * 10 <= tol_u and _rel(S, S64[r]) * 10 <= tol_s, f"rank {r}: drift too close"
        case.check_recorded_drift(_rel(U, U64), "fp32_vs_fp64_rel_norm_U")
        case.check_recorded_drift(_rel(S, S64[r]), "fp32_vs_fp64_rel_norm_S")
        assert compare_outputs((U, S), (U64.float(), S64[r].float()), case.tolerance).passed
        assert torch.equal(U, outs[0][0]), "ranks disagree on U"


def test_degeneracy(ranks):
    w, outs = ranks
    U_other, S_other = single_process(SHAPE, 10, w)
    for r, out in enumerate(outs):
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs((U_other.float(), S_other[r].float()), out, case.tolerance).passed
    assert float(outs[0][0].abs().max()) > 1e-2, "U must move away from U0 = 0"
