"""Cross-checks for probability/l2/hmm_forward_backward: path enumeration, a scaled NumPy forward-backward,
and conservation laws."""
import itertools
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_scaled_forward_backward(log_pi, log_A, log_B, obs, lengths):
    """Rabiner's scaled recursions in linear space, float64, one sequence at a time."""
    pi, A, B = (t.double().exp().numpy() for t in (log_pi, log_A, log_B))
    n_states, n_symbols = B.shape
    gammas, xis, counts, logliks = [], [], [], []
    for o in obs.numpy():
        T = len(o)
        alpha, scale = np.zeros((T, n_states)), np.zeros(T)
        a = pi * B[:, o[0]]
        for t in range(T):
            if t:
                a = (alpha[t - 1] @ A) * B[:, o[t]]
            scale[t] = a.sum()
            alpha[t] = a / scale[t]
        beta = np.ones((T, n_states))
        for t in range(T - 2, -1, -1):
            beta[t] = A @ (B[:, o[t + 1]] * beta[t + 1]) / scale[t + 1]
        gamma = alpha * beta
        xi = np.zeros((n_states, n_states))
        for t in range(T - 1):
            xi += alpha[t][:, None] * A * (B[:, o[t + 1]] * beta[t + 1])[None, :] / scale[t + 1]
        count = np.zeros((n_states, n_symbols))
        np.add.at(count.T, o, gamma)
        gammas.append(gamma), xis.append(xi), counts.append(count), logliks.append(np.log(scale).sum())
    return (torch.from_numpy(np.stack(gammas)), torch.from_numpy(np.stack(xis)),
            torch.from_numpy(np.stack(counts)), torch.tensor(logliks, dtype=torch.float64))


def test_matches_numpy_scaled_recursions():
    case.check_against(case.small_shape(), numpy_scaled_forward_backward)


def test_matches_numpy_scaled_recursions_many_states():
    case.check_against({"n_seqs": 3, "seq_len": 100, "n_states": 40, "n_symbols": 50}, numpy_scaled_forward_backward, seed=2)


def test_matches_sum_over_all_paths():
    gen = torch.Generator().manual_seed(5)
    log_pi, log_A, log_B = ref.hmm_parameters(3, 4, gen)
    T = 6
    obs = ref.sample_observations(log_pi, log_A, log_B, 2, T, gen)
    gamma, xi_sum, emit_counts, loglik = ref.Model()(log_pi.double(), log_A.double(), log_B.double(), obs,
                                                     torch.full((2,), T))
    pi, A, B = log_pi.double().exp(), log_A.double().exp(), log_B.double().exp()
    for s in range(2):
        o = obs[s].tolist()
        total, g, xi, em = 0.0, torch.zeros(T, 3, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64), \
            torch.zeros(3, 4, dtype=torch.float64)
        for path in itertools.product(range(3), repeat=T):
            p = pi[path[0]] * B[path[0], o[0]]
            for t in range(1, T):
                p = p * A[path[t - 1], path[t]] * B[path[t], o[t]]
            total += float(p)
            for t in range(T):
                g[t, path[t]] += p
                em[path[t], o[t]] += p
                if t < T - 1:
                    xi[path[t], path[t + 1]] += p
        assert abs(float(loglik[s]) - math.log(total)) < 1e-10
        assert torch.allclose(gamma[s], g / total, atol=1e-12)
        assert torch.allclose(xi_sum[s], xi / total, atol=1e-12)
        assert torch.allclose(emit_counts[s], em / total, atol=1e-12)


def test_conservation_laws():
    inputs, (gamma, xi_sum, emit_counts, loglik) = case.run(case.small_shape(), dtype=torch.float64)
    T = inputs[3].shape[1]
    assert torch.allclose(gamma.sum(2), torch.ones_like(gamma[:, :, 0]), atol=1e-12)
    assert torch.allclose(xi_sum.sum((1, 2)), torch.full_like(loglik, T - 1.0), atol=1e-9)
    assert torch.allclose(emit_counts.sum((1, 2)), torch.full_like(loglik, float(T)), atol=1e-9)
    assert torch.allclose(xi_sum.sum(2), gamma[:, :-1].sum(1), atol=1e-9)
    assert torch.allclose(xi_sum.sum(1), gamma[:, 1:].sum(1), atol=1e-9)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n_seqs": 2, "seq_len": 1024, "n_states": 16, "n_symbols": 4})
    case.check_calibration({"n_seqs": 4, "seq_len": 128, "n_states": 128, "n_symbols": 64}, seed=1)


def test_chunked_sweeps_match_unchunked_for_any_length(monkeypatch):
    """The xi and emit-count sweeps run in chunks of sequences and time steps; the last chunk is
    shorter when T - 1 is not a multiple of the step chunk (the disclosed H200 shape, T = 256 with
    16-step chunks, failed there). Small chunk budgets force every remainder at CPU sizes."""
    gen = torch.Generator().manual_seed(11)
    log_pi, log_A, log_B = (t.double() for t in ref.hmm_parameters(4, 5, gen))
    for seq_len in (2, 3, 17, 40):
        obs = ref.sample_observations(log_pi, log_A, log_B, 3, seq_len, gen)
        inputs = (log_pi, log_A, log_B, obs, torch.full((3,), seq_len))
        whole = ref.Model()(*inputs)
        for budget in (16, 32, 48, 64, 112, 224):  # seq_chunk 1-3, step_chunk 1-4 at K = 4
            monkeypatch.setattr(ref, "CHUNK_ELEMENTS", budget)
            chunked = ref.Model()(*inputs)
            for a, b in zip(chunked, whole):
                assert torch.allclose(a, b, atol=1e-12, rtol=1e-12), (seq_len, budget)
            monkeypatch.undo()
        expected = numpy_scaled_forward_backward(*inputs)
        for a, b in zip(whole, expected):
            assert torch.allclose(a, b, atol=1e-9), seq_len
