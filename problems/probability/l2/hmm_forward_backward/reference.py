"""probability/l2/hmm_forward_backward: HMM forward-backward posteriors and Baum-Welch E-step statistics.

Log space, N sequences of length T (every length equals T; `lengths` is kept for the interface of
the forward problem). alpha_0 = log_pi + log_B[:, o_0], alpha_t(j) = log_B[j, o_t] + logsumexp_i(alpha_{t-1}(i)
+ log_A[i, j]); beta_{T-1} = 0, beta_t(i) = logsumexp_j(log_A[i, j] + log_B[j, o_{t+1}] + beta_{t+1}(j));
loglik = logsumexp_j alpha_{T-1}(j); gamma_t = softmax(alpha_t + beta_t);
xi_sum[i, j] = sum_{t < T-1} exp(alpha_t(i) + log_A[i, j] + log_B[j, o_{t+1}] + beta_{t+1}(j) - c_t) with
c_t = logsumexp_{i,j} of the same terms (= loglik in exact arithmetic, but free of the rounding drift of alpha_t and beta_{t+1});
emit_counts[k, v] = sum_{t: o_t = v} gamma_t(k).
"""
import torch
import torch.nn as nn

CHUNK_ELEMENTS = 2**26  # [sequences, K, K] (or [sequences, steps, K, K]) terms formed at a time


def _chunk(rows: int, per_row: int) -> int:
    return max(1, min(rows, CHUNK_ELEMENTS // max(1, per_row)))


class Model(nn.Module):
    def forward(self, log_pi, log_A, log_B, obs, lengths):
        n_seqs, seq_len = obs.shape
        n_states, n_symbols = log_B.shape
        emit = log_B.t()[obs]  # [N, T, K]: log_B[k, o_t]
        seq_chunk = _chunk(n_seqs, n_states * n_states)

        def lse_from(prev, dim):  # logsumexp over i of prev_i + log_A[i, j] (dim 1), or over j (dim 2)
            parts = []
            for p in prev.split(seq_chunk):
                terms = p[:, :, None] + log_A[None] if dim == 1 else log_A[None] + p[:, None, :]
                parts.append(torch.logsumexp(terms, dim))
            return torch.cat(parts)

        alpha = torch.empty_like(emit)
        alpha[:, 0] = log_pi[None, :] + emit[:, 0]
        for t in range(1, seq_len):
            alpha[:, t] = emit[:, t] + lse_from(alpha[:, t - 1], 1)
        beta = torch.empty_like(emit)
        beta[:, -1] = 0
        for t in range(seq_len - 2, -1, -1):
            beta[:, t] = lse_from(emit[:, t + 1] + beta[:, t + 1], 2)
        loglik = torch.logsumexp(alpha[:, -1], 1)
        gamma = torch.softmax(alpha + beta, 2)

        # xi_t(i, j) is normalised by its own logsumexp over (i, j), which equals loglik in exact
        # arithmetic: the rounding shifts that alpha_t and beta_{t+1} accumulate then cancel as in gamma
        xi_sum = torch.zeros(n_seqs, n_states, n_states, dtype=emit.dtype, device=emit.device)
        ahead = emit[:, 1:] + beta[:, 1:]  # [N, T-1, K]
        step_chunk = _chunk(seq_len - 1, seq_chunk * n_states * n_states)
        for s in range(0, n_seqs, seq_chunk):
            for t0 in range(0, seq_len - 1, step_chunk):
                steps = slice(t0, min(t0 + step_chunk, seq_len - 1))  # alpha has one step more than ahead
                terms = (alpha[s:s + seq_chunk, steps, :, None] + log_A
                         + ahead[s:s + seq_chunk, steps, None, :])
                norm = torch.logsumexp(terms.flatten(2), 2)[:, :, None, None]
                xi_sum[s:s + seq_chunk] += torch.exp(terms - norm).sum(1)
        # emit_counts = gamma^T onehot(obs), the [sequences, T, V] one-hot formed a chunk of sequences at a time
        emit_counts = torch.cat([g.transpose(1, 2) @ torch.nn.functional.one_hot(o, n_symbols).to(g.dtype)
                                 for g, o in zip(gamma.split(_chunk(n_seqs, seq_len * n_symbols)),
                                                 obs.split(_chunk(n_seqs, seq_len * n_symbols)))])
        return gamma, xi_sum, emit_counts, loglik


def tolerance_scale(inputs, output):
    """float32 log-space alpha_t and beta_t carry rounding of the order of ulp(|loglik|), so every
    posterior quantity (gamma, xi, expected counts) is accurate relative to value * |loglik|."""
    gamma, xi_sum, emit_counts, loglik = output
    size = loglik.abs()
    return (gamma.abs() * size[:, None, None], xi_sum.abs() * size[:, None, None],
            emit_counts.abs() * size[:, None, None], None)


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
    """Observation sequences drawn from the HMM itself (inverse-CDF sampling)."""
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
    lengths = torch.full((n_seqs,), seq_len, dtype=torch.int64)
    return tuple(t.to(device) for t in (log_pi, log_A, log_B, obs, lengths))
