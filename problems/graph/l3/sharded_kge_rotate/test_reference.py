"""Cross-checks for graph/l3/sharded_kge_rotate: every rank's scores and loss (gloo, 2 and 3
processes) against NumPy complex128 arithmetic over the entity table reassembled from all shards."""
import numpy as np
import pytest
import torch

from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
SHAPE = {"n_entities": 2001, "dim": 16, "batch": 64, "negatives": 8, "n_relations": 10}


def log_sigmoid(x):
    return -np.logaddexp(0, -x)


def numpy_scores(shape, seed, world_size):
    n, d = shape["n_entities"], shape["dim"]
    ranks = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    table = np.zeros((n, d), dtype=np.complex128)
    for r, (shard, _, _) in enumerate(ranks):
        s = shard.double().numpy()
        table[r::world_size] = s[:, :d] + 1j * s[:, d:]
    rot = np.exp(1j * ref.get_init_inputs(shape)["phases"].double().numpy())
    out = []
    for _, triples, negatives in ranks:
        h, rel, t = (triples[:, i].numpy() for i in range(3))
        hr = table[h] * rot[rel]
        pos = ref.GAMMA - np.abs(hr - table[t]).sum(-1)
        neg = ref.GAMMA - np.abs(hr[:, None] - table[negatives.numpy()]).sum(-1)
        loss = np.mean(-log_sigmoid(pos) - log_sigmoid(-neg).mean(1))
        out.append(tuple(torch.tensor(v) for v in (pos, neg, loss)))
    return out


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 6, w)


def test_every_rank_matches_numpy(ranks):
    w, outs = ranks
    for r, (out, exp) in enumerate(zip(outs, numpy_scores(SHAPE, 6, w))):
        assert [o.shape for o in out] == [torch.Size([64]), torch.Size([64, 8]), torch.Size([])]
        err = max(float((o.double() - e).abs().max()) for o, e in zip(out, exp))
        assert err * 10 <= case.tolerance["atol"], f"rank {r}: fp32 vs fp64 drift {err}"
        case.check_recorded_drift(err)
        assert compare_outputs(out, tuple(e.float() for e in exp), case.tolerance).passed


def test_degeneracy(ranks):
    w, outs = ranks
    for out, alt in zip(outs, numpy_scores(SHAPE, 7, w)):
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs(tuple(a.float() for a in alt), out, case.tolerance).passed
    # remote rows matter: a rank that scored with zeros for entities it does not own would differ
    shard, triples, _ = case.problem.inputs(SHAPE, 6, "cpu", rank=0, world_size=w)
    assert bool((triples[:, 0] % w != 0).any()), "every rank must need remote entities"
