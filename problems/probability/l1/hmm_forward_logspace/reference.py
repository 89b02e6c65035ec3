"""probability/l1/hmm_forward_logspace: the HMM Forward algorithm in log space, batched sequences.

alpha_0 = log_pi + log_B[:, o_0]; alpha_t(j) = log_B[j, o_t] + logsumexp_i (alpha_{t-1}(i) + log_A[i, j])
for t < length (the state is frozen afterwards); log p(o) = logsumexp_j alpha_{length-1}(j).
"""
import torch
import torch.nn as nn

CHUNK_ELEMENTS = 2**26  # the [n, K, K] broadcast is formed for chunks of sequences


class Model(nn.Module):
    def forward(self, log_pi, log_A, log_B, obs, lengths):
        n_seqs, seq_len = obs.shape
        n_states = log_pi.shape[0]
        emissions = log_B.t()  # [V, K]
        alpha = log_pi[None, :] + emissions[obs[:, 0]]
        chunk = max(1, CHUNK_ELEMENTS // (n_states * n_states))
        for t in range(1, seq_len):
            summed = torch.cat([torch.logsumexp(a[:, :, None] + log_A[None], 1) for a in alpha.split(chunk)])
            new = emissions[obs[:, t]] + summed
            alpha = torch.where((t < lengths)[:, None], new, alpha)
        return torch.logsumexp(alpha, 1), alpha


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
    n_seqs, seq_len = shape["n_seqs"], shape["seq_len"]
    log_pi, log_A, log_B = hmm_parameters(shape["n_states"], shape["n_symbols"], generator)
    obs = sample_observations(log_pi, log_A, log_B, n_seqs, seq_len, generator)
    lengths = torch.randint(max(1, seq_len // 4), seq_len + 1, (n_seqs,), generator=generator)
    lengths[0] = seq_len  # at least one full-length sequence
    return tuple(t.to(device) for t in (log_pi, log_A, log_B, obs, lengths))
