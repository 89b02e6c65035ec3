"""Cross-checks for probability/l1/viterbi_decode: brute-force path enumeration and a NumPy DP."""
import itertools

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def numpy_viterbi(log_pi, log_A, log_B, obs):
    """Per-sequence float32 NumPy DP; np.argmax returns the first maximum (the spec's tie-break)."""
    log_pi, log_A, log_B, obs = log_pi.numpy(), log_A.numpy(), log_B.numpy(), obs.numpy()
    n_seqs, seq_len = obs.shape
    paths, scores = np.zeros((n_seqs, seq_len), dtype=np.int64), np.zeros(n_seqs, dtype=np.float32)
    for s in range(n_seqs):
        delta = log_pi + log_B[:, obs[s, 0]]
        back = []
        for t in range(1, seq_len):
            cand = delta[:, None] + log_A
            back.append(cand.argmax(0))
            delta = log_B[:, obs[s, t]] + cand.max(0)
        state = int(delta.argmax())
        scores[s], paths[s, -1] = delta[state], state
        for t in range(seq_len - 1, 0, -1):
            state = int(back[t - 1][state])
            paths[s, t - 1] = state
    return torch.from_numpy(paths), torch.from_numpy(scores)


def test_matches_numpy_dp_bit_exactly():
    inputs, (path, score) = case.run(case.small_shape())
    expected_path, expected_score = numpy_viterbi(*inputs)
    assert torch.equal(path, expected_path) and torch.equal(score, expected_score)


def test_matches_brute_force_enumeration():
    gen = torch.Generator().manual_seed(5)
    ref = case.problem.module
    log_pi, log_A, log_B = ref.hmm_parameters(3, 4, gen)
    obs = ref.sample_observations(log_pi, log_A, log_B, 6, 6, gen)
    path, score = ref.Model()(log_pi, log_A, log_B, obs)
    lp, la, lb = log_pi.double(), log_A.double(), log_B.double()
    for s in range(obs.shape[0]):
        o = obs[s].tolist()
        best = max(itertools.product(range(3), repeat=6),
                   key=lambda q: lp[q[0]] + lb[q[0], o[0]] + sum(la[q[t - 1], q[t]] + lb[q[t], o[t]] for t in range(1, 6)))
        total = lp[best[0]] + lb[best[0], o[0]] + sum(la[best[t - 1], best[t]] + lb[best[t], o[t]] for t in range(1, 6))
        assert path[s].tolist() == list(best)
        assert abs(float(score[s]) - float(total)) < 1e-5


def test_ties_pick_the_smallest_index():
    k, v = 4, 3
    flat = torch.zeros(k), torch.zeros(k, k), torch.zeros(k, v)
    obs = torch.zeros(2, 5, dtype=torch.int64)
    path, score = case.problem.module.Model()(*flat, obs)
    assert path.eq(0).all() and score.eq(0).all()


def test_float64_decodes_the_same_path():
    shape = case.manifest["tolerance"]["calibration"]["shape"]
    _, (path32, score32) = case.run(shape)
    _, (path64, score64) = case.run(shape, dtype=torch.float64)
    assert torch.equal(path32, path64)
    assert float((score32.double() - score64).abs().max()) < 1e-3


def test_degeneracy():
    case.check_degeneracy(case.small_shape())
