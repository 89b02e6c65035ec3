"""probability/l1/viterbi_decode: max-product decoding of an HMM with backtracking, batched sequences.

delta_0 = log_pi + log_B[:, o_0]; delta_t(j) = log_B[j, o_t] + max_i (delta_{t-1}(i) + log_A[i, j]),
psi_t(j) = the maximising i (smallest on ties). The path ends at argmax_j delta_{T-1}(j)
(smallest on ties) and follows psi backwards. Every delta is made of single float32
additions and maxima, so the path and the score are bit-reproducible.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, log_pi: torch.Tensor, log_A: torch.Tensor, log_B: torch.Tensor, obs: torch.Tensor):
        n_seqs, seq_len = obs.shape
        n_states = log_pi.shape[0]
        emissions = log_B.t()  # [V, K]: emissions[o] is the log-likelihood row of symbol o
        delta = log_pi[None, :] + emissions[obs[:, 0]]
        psi = torch.empty(seq_len, n_seqs, n_states, dtype=torch.int16, device=obs.device)
        for t in range(1, seq_len):
            scores = delta[:, :, None] + log_A[None, :, :]  # [N, K_from, K_to]
            best, arg = scores.max(1)
            # torch.max does not promise the first maximum: take the smallest maximising i explicitly
            psi[t] = torch.argmax((scores == best[:, None, :]).to(torch.uint8), 1).to(torch.int16)
            delta = emissions[obs[:, t]] + best
        best_score, state = delta.max(1)
        state = torch.argmax((delta == best_score[:, None]).to(torch.uint8), 1)
        path = torch.empty(n_seqs, seq_len, dtype=torch.int64, device=obs.device)
        path[:, -1] = state
        for t in range(seq_len - 1, 0, -1):
            state = psi[t].gather(1, state[:, None])[:, 0].long()
            path[:, t - 1] = state
        return path, best_score


def hmm_parameters(n_states: int, n_symbols: int, generator: torch.Generator):
    """A random HMM: sticky transitions (a heavy diagonal) and peaked emissions, float32."""
    log_pi = torch.log_softmax(torch.randn(n_states, generator=generator, dtype=torch.float64), 0)
    trans = torch.randn(n_states, n_states, generator=generator, dtype=torch.float64)
    log_A = torch.log_softmax(trans + 3.0 * torch.eye(n_states, dtype=torch.float64), 1)
    log_B = torch.log_softmax(2.0 * torch.randn(n_states, n_symbols, generator=generator, dtype=torch.float64), 1)
    return log_pi.float(), log_A.float(), log_B.float()


def _draw(cdf_rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    u = torch.rand(cdf_rows.shape[0], 1, generator=generator, dtype=torch.float64)
    return torch.searchsorted(cdf_rows.contiguous(), u * cdf_rows[:, -1:])[:, 0].clamp_(max=cdf_rows.shape[1] - 1)


def sample_observations(log_pi, log_A, log_B, n_seqs: int, seq_len: int, generator: torch.Generator):
    """Draw observation sequences from the HMM itself (inverse-CDF sampling)."""
    cum_pi = log_pi.double().exp().cumsum(0).expand(n_seqs, -1)
    cum_A, cum_B = log_A.double().exp().cumsum(1), log_B.double().exp().cumsum(1)
    state = _draw(cum_pi, generator)
    obs = torch.empty(n_seqs, seq_len, dtype=torch.int64)
    for t in range(seq_len):
        obs[:, t] = _draw(cum_B[state], generator)
        state = _draw(cum_A[state], generator)
    return obs


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    log_pi, log_A, log_B = hmm_parameters(shape["n_states"], shape["n_symbols"], generator)
    obs = sample_observations(log_pi, log_A, log_B, shape["n_seqs"], shape["seq_len"], generator)
    return tuple(t.to(device) for t in (log_pi, log_A, log_B, obs))
