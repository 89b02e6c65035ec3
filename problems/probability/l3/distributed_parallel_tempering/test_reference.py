"""Cross-checks for probability/l3/distributed_parallel_tempering: every rank's outputs (gloo,
2 and 3 processes) against a single-process plain implementation over all replicas, and the
sweep convention against probability/l1/gibbs_ising_checkerboard."""
from pathlib import Path

import numpy as np
import pytest
import torch

from orchestrator.runner.cbrng import cb_uniform
from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.runner.problem import load_problem
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
GIBBS = load_problem(Path(__file__).resolve().parents[2] / "l1" / "gibbs_ising_checkerboard")
SHAPE = {"replicas": 9, "L": 12, "sweeps_per_round": 2, "rounds": 8}  # 9: uneven blocks


def numpy_energy(lattice):
    s = lattice.astype(np.int64)
    return int(-(s * np.roll(s, -1, 0) + s * np.roll(s, -1, 1)).sum())


def single_process(shape, seed, world_size):
    shards = [case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    spins = torch.cat([s[0] for s in shards])
    _, betas, p_up, rng_seed = shards[0]
    n = shape["replicas"]
    temp = list(range(n))
    temps, energies = [], []
    for rho in range(shape["rounds"]):
        for i in range(n):  # one replica at a time
            for k in range(shape["sweeps_per_round"]):
                spins[i:i + 1] = ref.sweep(spins[i:i + 1], p_up[[temp[i]]], rng_seed, torch.tensor([i]),
                                           rho * shape["sweeps_per_round"] + k)
        e = [numpy_energy(spins[i].numpy()) for i in range(n)]
        energies.append(e)
        at = {t: i for i, t in enumerate(temp)}
        for k in range(rho % 2, n - 1, 2):
            a, b = at[k], at[k + 1]
            ratio = np.exp(min(0.0, (float(betas[k + 1]) - float(betas[k])) * (e[b] - e[a])))
            if float(cb_uniform(rng_seed, rho, k)) < ratio:
                temp[a], temp[b] = k + 1, k
        temps.append(list(temp))
    return torch.tensor(temps), torch.tensor(energies), spins


def test_sweeps_follow_gibbs_ising_checkerboard():
    spins, _, p_up, seed = case.problem.inputs(SHAPE, 0, "cpu", rank=0, world_size=1)
    s = spins.clone()
    for k in range(3):
        s = ref.sweep(s, p_up[[4]].expand(len(s), 5), seed, torch.arange(len(s)), k)
    expected, _ = GIBBS.module.Model()(spins, p_up[4], seed, 3)
    assert torch.equal(s, expected)


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 1, w)


def test_every_rank_matches_single_process(ranks):
    w, outs = ranks
    temps, energies, spins = single_process(SHAPE, 1, w)
    n = SHAPE["replicas"]
    for r, (t, e, s) in enumerate(outs):
        lo, hi = ref.block(n, w, r)
        assert t.dtype == e.dtype == torch.int64 and s.dtype == torch.int8
        assert torch.equal(t, temps) and torch.equal(e, energies) and torch.equal(s, spins[lo:hi]), f"rank {r}"
    accepted = int((temps[1:] != temps[:-1]).any(1).sum())
    assert 0 < accepted, "some swaps must be accepted"
    assert not torch.equal(temps[-1], torch.arange(n)), "the temperature labels must move"


def test_degeneracy(ranks):
    w, outs = ranks
    other = single_process(SHAPE, 2, w)
    for r, out in enumerate(outs):
        lo, hi = ref.block(SHAPE["replicas"], w, r)
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs((other[0], other[1], other[2][lo:hi]), out, case.tolerance).passed
