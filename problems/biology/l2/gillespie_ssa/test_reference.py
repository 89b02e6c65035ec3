"""Cross-checks for biology/l2/gillespie_ssa: a plain Python trajectory loop with the same draws."""
import math

import torch

from orchestrator.runner.cbrng import cb_uniform64
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def python_ssa(orders, nu, rates, x0, t_end, seed):
    r, d, c = orders.tolist(), nu.tolist(), rates.tolist()
    xs, ns = [], []
    for b, x in enumerate(x0.tolist()):
        t, n = 0.0, 0
        while True:
            a = []
            for m in range(len(c)):
                p = c[m]
                for s, order in enumerate(r[m]):
                    p *= 1.0 if order == 0 else (float(x[s]) if order == 1 else x[s] * (x[s] - 1) / 2.0)
                a.append(p)
            a0 = 0.0
            cum = []
            for p in a:
                a0 += p
                cum.append(a0)
            u1 = float(cb_uniform64(seed, b, n, 0))
            u2 = float(cb_uniform64(seed, b, n, 1))
            if a0 == 0:
                break
            tau = -math.log(u1) / a0
            if t + tau > float(t_end):
                break
            m = next((i for i, v in enumerate(cum) if v > u2 * a0), len(cum) - 1)
            x = [xi + di for xi, di in zip(x, d[m])]
            t += tau
            n += 1
        xs.append(x)
        ns.append(n)
    return torch.tensor(xs, dtype=torch.int32), torch.tensor(ns)


def test_matches_python_loop():
    case.check_against({"n_traj": 12, "n_species": 4, "n_reactions": 9, "target_events": 60}, python_ssa)


def test_event_count_near_target_and_states_nonnegative():
    x, n = case.problem.module.Model()(*case.problem.inputs(case.small_shape(), 0, "cpu"))
    assert bool((x >= 0).all()) and 10 < float(n.double().mean()) < 90


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
