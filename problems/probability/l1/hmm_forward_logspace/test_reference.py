"""Cross-checks for probability/l1/hmm_forward_logspace: path enumeration and a SciPy forward pass."""
import itertools
import math

import numpy as np
import torch
from scipy.special import logsumexp

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_forward(log_pi, log_A, log_B, obs, lengths):
    """Per-sequence float64 forward pass with scipy.special.logsumexp."""
    log_pi, log_A, log_B = (t.double().numpy() for t in (log_pi, log_A, log_B))
    obs, lengths = obs.numpy(), lengths.numpy()
    logliks, alphas = [], []
    for s in range(obs.shape[0]):
        alpha = log_pi + log_B[:, obs[s, 0]]
        for t in range(1, int(lengths[s])):
            alpha = log_B[:, obs[s, t]] + logsumexp(alpha[:, None] + log_A, axis=0)
        logliks.append(logsumexp(alpha))
        alphas.append(alpha)
    return torch.tensor(logliks), torch.from_numpy(np.stack(alphas))


def test_matches_scipy_float64():
    case.check_against(case.small_shape(), scipy_forward)


def test_matches_sum_over_all_paths():
    ref = case.problem.module
    gen = torch.Generator().manual_seed(3)
    log_pi, log_A, log_B = ref.hmm_parameters(3, 4, gen)
    obs = ref.sample_observations(log_pi, log_A, log_B, 4, 6, gen)
    lengths = torch.tensor([6, 5, 1, 3])
    loglik, _ = ref.Model()(log_pi, log_A, log_B, obs, lengths)
    pi, A, B = log_pi.double().exp(), log_A.double().exp(), log_B.double().exp()
    for s in range(4):
        o, n = obs[s].tolist(), int(lengths[s])
        total = 0.0
        for q in itertools.product(range(3), repeat=n):
            p = pi[q[0]] * B[q[0], o[0]]
            for t in range(1, n):
                p = p * A[q[t - 1], q[t]] * B[q[t], o[t]]
            total += float(p)
        assert abs(float(loglik[s]) - math.log(total)) < 1e-5


def test_frozen_after_length():
    inputs, (loglik, alpha) = case.run(case.small_shape())
    log_pi, log_A, log_B, obs, lengths = inputs
    cut = lengths.clone()
    obs2 = obs.clone()
    for s in range(obs.shape[0]):  # symbols after the end must not matter
        obs2[s, int(cut[s]):] = 0
    loglik2, alpha2 = case.problem.module.Model()(log_pi, log_A, log_B, obs2, lengths)
    assert torch.equal(loglik, loglik2) and torch.equal(alpha, alpha2)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_seqs": 32, "seq_len": 128, "n_states": 32, "n_symbols": 16}
    max_abs, _ = case.drift(shape)
    assert max_abs * 5 <= case.tolerance["atol"] + case.tolerance["rtol"] * 1000
    case.check_calibration(shape)
