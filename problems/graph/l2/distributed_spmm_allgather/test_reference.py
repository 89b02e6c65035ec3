"""Cross-checks for graph/l2/distributed_spmm_allgather: every rank's output, from 2 and 3
gloo processes on 127.0.0.1, against the single-process scipy.sparse product in float64."""
import pytest
import scipy.sparse
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SHAPE = {"n_total": 3001, "avg_degree": 8, "feat": 32, "locality": 0.5}  # 3001: uneven blocks


def single_process(shape, seed, world_size):
    row, col, val, x = ref.global_problem(shape, torch.Generator().manual_seed(seed), world_size)
    n = shape["n_total"]
    a = scipy.sparse.csr_matrix((val.double().numpy(), (row.numpy(), col.numpy())), shape=(n, n))
    y = torch.from_numpy(a @ x.double().numpy())
    bounds = ref.block_bounds(n, world_size)
    return [y[bounds[r]:bounds[r + 1]] for r in range(world_size)]


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 7, w)


def test_every_rank_matches_scipy(ranks):
    w, outs = ranks
    expected = single_process(SHAPE, 7, w)
    assert len(outs) == w
    for r, (out, exp) in enumerate(zip(outs, expected)):
        assert out.dtype == torch.float32 and out.shape == exp.shape
        err = float((out.double() - exp).abs().max())
        # calibration: fp32 drift at least 10x inside the tolerance
        assert err * 10 <= case.tolerance["atol"], f"rank {r}: fp32 vs fp64 drift {err}"
        case.check_recorded_drift(err)
        assert compare_outputs(out, exp.float(), case.tolerance).passed


def test_degeneracy(ranks):
    w, outs = ranks
    other = single_process(SHAPE, 8, w)
    for out, alt in zip(outs, other):
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed, "zero output passes"
        assert not compare_outputs(alt.float(), out, case.tolerance).passed, "output does not change with the seed"


def test_shards_partition_the_graph():
    w, shape = 3, SHAPE
    row, col, val, x = ref.global_problem(shape, torch.Generator().manual_seed(1), w)
    shards = [case.problem.inputs(shape, 1, "cpu", rank=r, world_size=w) for r in range(w)]
    assert sum(s[1].numel() for s in shards) == col.numel()
    assert torch.equal(torch.cat([s[3] for s in shards]), x)
    bounds = ref.block_bounds(shape["n_total"], w)
    local = sum(int(((s[1] >= bounds[r]) & (s[1] < bounds[r + 1])).sum()) for r, s in enumerate(shards))
    frac = local / col.numel()
    assert 0.5 < frac < 0.5 + 0.5 / w + 0.05, f"locality knob not honoured: {frac}"
    for r, (rowptr, c, v, xl) in enumerate(shards):
        assert rowptr[0] == 0 and rowptr[-1] == c.numel() == v.numel()
        assert xl.shape[0] == rowptr.numel() - 1 == bounds[r + 1] - bounds[r]
