"""Oracle for probability/l1/viterbi_decode: the whole forward pass and backtrack in one Triton kernel.

Each program owns a few sequences for all T steps: delta ping-pongs through a small scratch
buffer (one row per sequence, L1/L2 resident), the max over i is a running strict-greater
update (which keeps the smallest maximising i), psi is written as int16, and the program
backtracks its own sequences at the end. Same float32 additions and maxima as the reference.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


# n_seqs.to() needs a tensor argument: Triton would turn a value of 1 into a Python constant
@triton.jit(do_not_specialize=["n_seqs"])
def _viterbi(log_pi, log_A, log_B, obs, delta, psi, path, score, n_seqs, seq_len, n_states, n_symbols,
             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n_seqs
    rows64 = rows.to(tl.int64)
    plane = n_seqs.to(tl.int64) * n_states
    for j0 in range(0, n_states, BLOCK_K):
        j = j0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] & (j[None, :] < n_states)
        o = tl.load(obs + rows64 * seq_len, mask=row_ok, other=0)
        d0 = tl.load(log_pi + j, mask=j < n_states, other=0.0)[None, :] + \
            tl.load(log_B + j[None, :] * n_symbols + o[:, None], mask=mask, other=0.0)
        tl.store(delta + rows64[:, None] * n_states + j[None, :], d0, mask=mask)
    tl.debug_barrier()
    for t in range(1, seq_len):
        cur = delta + ((t - 1) % 2) * plane + rows64 * n_states
        nxt = delta + (t % 2) * plane + rows64 * n_states
        o = tl.load(obs + rows64 * seq_len + t, mask=row_ok, other=0)
        for j0 in range(0, n_states, BLOCK_K):
            j = j0 + tl.arange(0, BLOCK_K)
            mask = row_ok[:, None] & (j[None, :] < n_states)
            best = tl.full([BLOCK_N, BLOCK_K], -float("inf"), tl.float32)
            arg = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.int32)
            for i in range(0, n_states):
                d = tl.load(cur + i, mask=row_ok, other=0.0)
                a = tl.load(log_A + i * n_states + j, mask=j < n_states, other=0.0)
                cand = d[:, None] + a[None, :]
                better = cand > best
                best = tl.where(better, cand, best)
                arg = tl.where(better, i, arg)
            new = tl.load(log_B + j[None, :] * n_symbols + o[:, None], mask=mask, other=0.0) + best
            tl.store(nxt[:, None] + j[None, :], new, mask=mask)
            tl.store(psi + t * plane + rows64[:, None] * n_states + j[None, :], arg.to(tl.int16), mask=mask)
        tl.debug_barrier()
    last = delta + ((seq_len - 1) % 2) * plane + rows64 * n_states
    top = tl.full([BLOCK_N], -float("inf"), tl.float32)
    state = tl.zeros([BLOCK_N], dtype=tl.int32)
    for j0 in range(0, n_states, BLOCK_K):
        j = j0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] & (j[None, :] < n_states)
        d = tl.load(last[:, None] + j[None, :], mask=mask, other=-float("inf"))
        chunk_top = tl.max(d, axis=1)
        chunk_arg = tl.min(tl.where(d == chunk_top[:, None], j[None, :], n_states), axis=1)
        better = (chunk_top > top) | (j0 == 0)
        state = tl.where(better, chunk_arg, state)
        top = tl.where(better, chunk_top, top)
    tl.store(score + rows, top, mask=row_ok)
    tl.store(path + rows64 * seq_len + seq_len - 1, state.to(tl.int64), mask=row_ok)
    for s in range(1, seq_len):
        t = seq_len - s
        state = tl.load(psi + t * plane + rows64 * n_states + state, mask=row_ok, other=0).to(tl.int32)
        tl.store(path + rows64 * seq_len + t - 1, state.to(tl.int64), mask=row_ok)


class ModelNew(nn.Module):
    def forward(self, log_pi: torch.Tensor, log_A: torch.Tensor, log_B: torch.Tensor, obs: torch.Tensor):
        n_seqs, seq_len = obs.shape
        n_states, n_symbols = log_B.shape
        dev = obs.device
        delta = torch.empty(2, n_seqs, n_states, dtype=log_pi.dtype, device=dev)
        psi = torch.empty(seq_len, n_seqs, n_states, dtype=torch.int16, device=dev)
        path = torch.empty(n_seqs, seq_len, dtype=torch.int64, device=dev)
        score = torch.empty(n_seqs, dtype=log_pi.dtype, device=dev)
        block_n = 8 if obs.is_cuda else 64  # many small programs on a GPU; few (cheap to interpret) on a CPU
        block_k = min(128, triton.next_power_of_2(n_states))
        _viterbi[(triton.cdiv(n_seqs, block_n),)](log_pi, log_A.contiguous(), log_B.contiguous(), obs.contiguous(),
                                                  delta, psi, path, score, n_seqs, seq_len, n_states, n_symbols,
                                                  BLOCK_N=block_n, BLOCK_K=block_k)
        return path, score
