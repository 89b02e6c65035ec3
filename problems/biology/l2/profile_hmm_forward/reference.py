"""biology/l2/profile_hmm_forward: Forward log-likelihood of a local profile HMM (Plan7 core, no N/C/J)."""
import math

import torch
import torch.nn as nn

ALPHABET = 20
MM, MI, MD, IM, II, DM, DD = range(7)  # columns of the log-transition table t [K, 7]


def _lse(*terms):
    return torch.logsumexp(torch.stack(terms), 0)


class Model(nn.Module):
    def __init__(self, t, e_m, e_i):
        super().__init__()
        self.t, self.e_m, self.e_i = t, e_m, e_i

    def forward(self, seqs, lengths):
        t, e_m, e_i = self.t, self.e_m, self.e_i
        batch, seq_len = seqs.shape
        n_nodes = t.shape[0]
        neg_inf = torch.tensor(float("-inf"), dtype=t.dtype, device=t.device)
        entry = torch.full((batch, n_nodes), math.log(2.0 / (n_nodes * (n_nodes + 1))), dtype=t.dtype, device=t.device)
        m = torch.full((batch, n_nodes), float("-inf"), dtype=t.dtype, device=t.device)
        i_state, d = m.clone(), m.clone()
        score = torch.full((batch,), float("-inf"), dtype=t.dtype, device=t.device)

        def shift(x):  # value of node k-1 at node k; node 0 has no predecessor
            return torch.cat([neg_inf.expand(batch, 1), x[:, :-1]], 1)

        # transitions leaving node k-1, aligned with node k
        t_mm, t_im, t_dm = (torch.cat([neg_inf.view(1), t[:-1, c]]) for c in (MM, IM, DM))
        t_md, t_dd = torch.cat([neg_inf.view(1), t[:-1, MD]]), torch.cat([t.new_zeros(1), t[:-1, DD]])
        dd_cum = torch.cumsum(t_dd, 0)  # D_k = dd_cum_k + logcumsumexp_l(a_l - dd_cum_l)
        for pos in range(seq_len):
            x = seqs[:, pos]
            m_new = e_m[:, x].T + _lse(entry, shift(m) + t_mm, shift(i_state) + t_im, shift(d) + t_dm)
            i_state = e_i[:, x].T + _lse(m + t[:, MI], i_state + t[:, II])
            m = m_new
            a = shift(m) + t_md
            d = dd_cum + torch.logcumsumexp(a - dd_cum, 1)
            live = pos < lengths
            score = torch.where(live, torch.logaddexp(score, torch.logsumexp(m, 1)), score)
        return score


def _log_probs(gen, rows, cols, concentration):
    """Rows of log-probabilities, normalized (-log U)^(1/a) weights: small a gives peaked rows."""
    u = torch.rand(rows, cols, generator=gen).clamp_min(1e-12)
    w = (-torch.log(u)) ** (1.0 / concentration)
    return torch.log(w / w.sum(1, keepdim=True))


def get_init_inputs(shape):
    k = shape["model_len"]
    gen = torch.Generator().manual_seed(2023)
    t = torch.empty(k, 7)
    t[:, [MM, MI, MD]] = torch.log(torch.tensor([0.90, 0.05, 0.05]) * (1 + 0.2 * torch.rand(k, 3, generator=gen)))
    t[:, [IM, II]] = torch.log(torch.tensor([0.6, 0.4]) * (1 + 0.2 * torch.rand(k, 2, generator=gen)))
    t[:, [DM, DD]] = torch.log(torch.tensor([0.7, 0.3]) * (1 + 0.2 * torch.rand(k, 2, generator=gen)))
    for group in ([MM, MI, MD], [IM, II], [DM, DD]):  # each state's outgoing probabilities sum to 1
        t[:, group] -= torch.logsumexp(t[:, group], 1, keepdim=True)
    # log-odds emission scores against a uniform background (HMMER's convention), so homologous
    # segments score O(10^2) nats and long alignments, inserts and deletes all matter
    background = math.log(1.0 / ALPHABET)
    e_m = _log_probs(gen, k, ALPHABET, 0.3) - background   # peaked match emissions (conserved columns)
    e_i = _log_probs(gen, k, ALPHABET, 5.0) - background   # near-background insert emissions
    return {"t": t, "e_m": e_m, "e_i": e_i}


def get_inputs(shape, generator, device):
    batch, seq_len, k = shape["batch"], shape["seq_len"], shape["model_len"]
    e_m = get_init_inputs(shape)["e_m"] + math.log(1.0 / ALPHABET)  # back to log-probabilities
    seqs = torch.randint(0, ALPHABET, (batch, seq_len), generator=generator)
    # half of the sequences are emitted by consecutive match states from a random start node: homologs
    start = torch.randint(0, k, (batch, 1), generator=generator)
    node = (start + torch.arange(seq_len)) % k
    cdf = torch.cumsum(e_m.exp(), 1)[node]                                  # [B, L, 20]
    u = torch.rand(batch, seq_len, 1, generator=generator) * cdf[..., -1:]
    emitted = (cdf < u).sum(-1).clamp_max(ALPHABET - 1)
    homolog = torch.rand(batch, 1, generator=generator) < 0.5
    seqs = torch.where(homolog, emitted, seqs)
    lengths = torch.randint(seq_len // 2, seq_len + 1, (batch,), generator=generator)
    return seqs.to(device), lengths.to(device)
