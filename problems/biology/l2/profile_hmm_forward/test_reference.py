"""Cross-checks for biology/l2/profile_hmm_forward: a scalar float64 Forward recursion."""
import math

import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
NEG = float("-inf")


def _lse(*xs):
    m = max(xs)
    return m if m == NEG else m + math.log(sum(math.exp(x - m) for x in xs))


def scalar_forward(seqs, lengths, t, e_m, e_i):
    t, e_m, e_i = t.double().tolist(), e_m.double().tolist(), e_i.double().tolist()
    k_max = len(t)
    entry = math.log(2.0 / (k_max * (k_max + 1)))
    scores = []
    for row, n in zip(seqs.tolist(), lengths.tolist()):
        # index 0 is the empty node/position border
        m = [[NEG] * (k_max + 1) for _ in range(n + 1)]
        ins = [[NEG] * (k_max + 1) for _ in range(n + 1)]
        d = [[NEG] * (k_max + 1) for _ in range(n + 1)]
        total = NEG
        for i in range(1, n + 1):
            x = row[i - 1]
            for k in range(1, k_max + 1):
                if k > 1:
                    tp = t[k - 2]  # transitions leaving node k-1
                    into_m = _lse(entry, m[i - 1][k - 1] + tp[0], ins[i - 1][k - 1] + tp[3], d[i - 1][k - 1] + tp[5])
                else:
                    into_m = entry
                m[i][k] = e_m[k - 1][x] + into_m
                ins[i][k] = e_i[k - 1][x] + _lse(m[i - 1][k] + t[k - 1][1], ins[i - 1][k] + t[k - 1][4])
                if k > 1:
                    d[i][k] = _lse(m[i][k - 1] + t[k - 2][2], d[i][k - 1] + t[k - 2][6])
                total = _lse(total, m[i][k])
        scores.append(total)
    return torch.tensor(scores, dtype=torch.float64)


def test_matches_scalar_forward():
    case.check_against({"batch": 6, "seq_len": 14, "model_len": 9}, scalar_forward)


def test_one_node_model_closed_form():
    # K = 1: only M states, each entered fresh at every position, so loglik = log sum_i entry * e_M(x_i)
    init = {"t": torch.zeros(1, 7), "e_m": torch.log(torch.full((1, 20), 0.05)), "e_i": torch.zeros(1, 20)}
    seqs = torch.zeros(1, 7, dtype=torch.long)
    out = ref.Model(**init)(seqs, torch.tensor([5]))
    assert abs(float(out) - math.log(5 * 1.0 * 0.05)) < 1e-5


def test_transitions_are_normalized():
    t = case.problem.init_inputs({"model_len": 30})["t"]
    for group in ([0, 1, 2], [3, 4], [5, 6]):
        torch.testing.assert_close(t[:, group].exp().sum(1), torch.ones(30))


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"batch": 32, "seq_len": 100, "model_len": 100}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
