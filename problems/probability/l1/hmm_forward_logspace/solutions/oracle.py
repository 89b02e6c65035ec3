"""Oracle for probability/l1/hmm_forward_logspace: the whole recursion in one Triton kernel.

Each program owns BLOCK_N sequences for all T steps. The logsumexp over i becomes a GEMM in
linear space: logsumexp_i(alpha_i + log A_ij) = m + log(sum_i exp(alpha_i - m) A_ij) with
m = max_i alpha_i, so each step is one [BLOCK_N, K] x [K, K] tensor-core product (3xTF32,
about float32 accuracy) instead of a [N, K, K] broadcast. alpha ping-pongs through a small
scratch buffer; the row maximum for the next step is taken while storing.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


# n_seqs.to() needs a tensor argument: Triton would turn a value of 1 into a Python constant
@triton.jit(do_not_specialize=["n_seqs"])
def _forward(log_pi, trans, log_B, obs, lengths, alpha, loglik, alpha_out, n_seqs, seq_len, n_states, n_symbols,
             BLOCK_N: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_I: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n_seqs
    rows64 = rows.to(tl.int64)
    plane = n_seqs.to(tl.int64) * n_states
    length = tl.load(lengths + rows, mask=row_ok, other=1)
    o = tl.load(obs + rows64 * seq_len, mask=row_ok, other=0)
    top = tl.full([BLOCK_N], -float("inf"), tl.float32)
    for j0 in range(0, n_states, BLOCK_J):
        j = j0 + tl.arange(0, BLOCK_J)
        mask = row_ok[:, None] & (j[None, :] < n_states)
        a0 = tl.load(log_pi + j, mask=j < n_states, other=0.0)[None, :] + \
            tl.load(log_B + j[None, :] * n_symbols + o[:, None], mask=mask, other=0.0)
        tl.store(alpha + rows64[:, None] * n_states + j[None, :], a0, mask=mask)
        top = tl.maximum(top, tl.max(tl.where(mask, a0, -float("inf")), axis=1))
    tl.debug_barrier()
    for t in range(1, seq_len):
        cur = alpha + ((t - 1) % 2) * plane + rows64 * n_states
        nxt = alpha + (t % 2) * plane + rows64 * n_states
        o = tl.load(obs + rows64 * seq_len + t, mask=row_ok, other=0)
        live = t < length
        shift = tl.where(row_ok, top, 0.0)
        new_top = tl.full([BLOCK_N], -float("inf"), tl.float32)
        for j0 in range(0, n_states, BLOCK_J):
            j = j0 + tl.arange(0, BLOCK_J)
            mask = row_ok[:, None] & (j[None, :] < n_states)
            acc = tl.zeros([BLOCK_N, BLOCK_J], dtype=tl.float32)
            for i0 in range(0, n_states, BLOCK_I):
                i = i0 + tl.arange(0, BLOCK_I)
                a = tl.load(cur[:, None] + i[None, :], mask=row_ok[:, None] & (i[None, :] < n_states), other=-float("inf"))
                p = tl.exp(a - shift[:, None])
                w = tl.load(trans + i[:, None] * n_states + j[None, :], mask=(i[:, None] < n_states) & (j[None, :] < n_states), other=0.0)
                acc = tl.dot(p, w, acc, input_precision="tf32x3")
            new = tl.load(log_B + j[None, :] * n_symbols + o[:, None], mask=mask, other=0.0) + (tl.log(acc) + shift[:, None])
            old = tl.load(cur[:, None] + j[None, :], mask=mask, other=0.0)
            new = tl.where(live[:, None], new, old)
            tl.store(nxt[:, None] + j[None, :], new, mask=mask)
            new_top = tl.maximum(new_top, tl.max(tl.where(mask, new, -float("inf")), axis=1))
        top = new_top
        tl.debug_barrier()
    last = alpha + ((seq_len - 1) % 2) * plane + rows64 * n_states
    shift = tl.where(row_ok, top, 0.0)
    total = tl.zeros([BLOCK_N], dtype=tl.float32)
    for j0 in range(0, n_states, BLOCK_J):
        j = j0 + tl.arange(0, BLOCK_J)
        mask = row_ok[:, None] & (j[None, :] < n_states)
        a = tl.load(last[:, None] + j[None, :], mask=mask, other=-float("inf"))
        total += tl.sum(tl.exp(a - shift[:, None]), axis=1)
        tl.store(alpha_out + rows64[:, None] * n_states + j[None, :], a, mask=mask)
    tl.store(loglik + rows, shift + tl.log(total), mask=row_ok)


class ModelNew(nn.Module):
    def forward(self, log_pi, log_A, log_B, obs, lengths):
        n_seqs, seq_len = obs.shape
        n_states, n_symbols = log_B.shape
        dev = obs.device
        trans = log_A.exp().contiguous()  # linear-space transition matrix for the GEMM form
        alpha = torch.empty(2, n_seqs, n_states, dtype=log_pi.dtype, device=dev)
        alpha_out = torch.empty(n_seqs, n_states, dtype=log_pi.dtype, device=dev)
        loglik = torch.empty(n_seqs, dtype=log_pi.dtype, device=dev)
        block_n = 16 if obs.is_cuda else 64
        block_k = min(64, triton.next_power_of_2(n_states))
        _forward[(triton.cdiv(n_seqs, block_n),)](log_pi, trans, log_B.contiguous(), obs.contiguous(), lengths,
                                                  alpha, loglik, alpha_out, n_seqs, seq_len, n_states, n_symbols,
                                                  BLOCK_N=block_n, BLOCK_J=block_k, BLOCK_I=block_k)
        return loglik, alpha_out
