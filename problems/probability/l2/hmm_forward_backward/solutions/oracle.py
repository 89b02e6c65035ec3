"""Oracle for probability/l2/hmm_forward_backward: Triton kernels, log space with GEMM inner products.

Each logsumexp over K states is a max shift plus a float32 (IEEE) tl.dot against exp(log_A):
alpha_t(j) = e_t(j) + m + log sum_i exp(alpha_{t-1}(i) - m) A(i, j), one launch per step for a
block of 16 sequences x a block of states (the backward sweep likewise with A^T). After both sweeps:
- xi: l_t(i, j) = alpha_t(i) + log A(i, j) + v_{t+1}(j) with v = e + beta factorises as
  P_t(i) A(i, j) Q_t(j) exp(m1_t + m2_t), so the per-step normaliser is s_t = P_t^T A Q_t and
  xi_sum = A o sum_t (P_t / s_t)^T Q_t: one GEMM over t per (i, j) tile;
- gamma = softmax(alpha + beta) row by row, and emit_counts = gamma^T onehot(obs) as a GEMM over t;
- loglik = logsumexp alpha_{T-1}.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _forward_step(alpha, log_A, log_B, obs, t, n_seqs, seq_len, K, V,
                  BN: tl.constexpr, BJ: tl.constexpr, BI: tl.constexpr):
    seq = tl.program_id(0) * BN + tl.arange(0, BN)
    j = tl.program_id(1) * BJ + tl.arange(0, BJ)
    seq_ok = seq < n_seqs
    j_ok = j < K
    prev = alpha + (seq.to(tl.int64) * seq_len + t - 1) * K
    m = tl.full([BN], -float("inf"), tl.float32)
    for i0 in range(0, K, BI):
        i = i0 + tl.arange(0, BI)
        ok = seq_ok[:, None] & (i[None, :] < K)
        m = tl.maximum(m, tl.max(tl.load(prev[:, None] + i[None, :], mask=ok, other=-float("inf")), 1))
    m = tl.where(seq_ok, m, 0.0)
    acc = tl.zeros([BN, BJ], dtype=tl.float32)
    for i0 in range(0, K, BI):
        i = i0 + tl.arange(0, BI)
        ok = seq_ok[:, None] & (i[None, :] < K)
        p = tl.exp(tl.load(prev[:, None] + i[None, :], mask=ok, other=-float("inf")) - m[:, None])
        a_ok = (i[:, None] < K) & j_ok[None, :]
        a = tl.exp(tl.load(log_A + i[:, None] * K + j[None, :], mask=a_ok, other=-float("inf")))
        acc += tl.dot(p, a, input_precision="ieee")
    o = tl.load(obs + seq.to(tl.int64) * seq_len + t, mask=seq_ok, other=0)
    ok = seq_ok[:, None] & j_ok[None, :]
    e = tl.load(log_B + j[None, :] * V + o[:, None], mask=ok, other=0.0)
    tl.store(alpha + (seq.to(tl.int64) * seq_len + t)[:, None] * K + j[None, :], e + m[:, None] + tl.log(acc), mask=ok)


@triton.jit
def _backward_step(beta, log_A, log_B, obs, t, n_seqs, seq_len, K, V,
                   BN: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """beta_t(i) = m + log sum_j A(i, j) exp(v_j - m), v = log_B[:, o_{t+1}] + beta_{t+1}."""
    seq = tl.program_id(0) * BN + tl.arange(0, BN)
    i = tl.program_id(1) * BI + tl.arange(0, BI)
    seq_ok = seq < n_seqs
    i_ok = i < K
    nxt = beta + (seq.to(tl.int64) * seq_len + t + 1) * K
    o = tl.load(obs + seq.to(tl.int64) * seq_len + t + 1, mask=seq_ok, other=0)
    m = tl.full([BN], -float("inf"), tl.float32)
    for j0 in range(0, K, BJ):
        j = j0 + tl.arange(0, BJ)
        ok = seq_ok[:, None] & (j[None, :] < K)
        v = tl.load(nxt[:, None] + j[None, :], mask=ok, other=0.0) + tl.load(log_B + j[None, :] * V + o[:, None], mask=ok, other=0.0)
        m = tl.maximum(m, tl.max(tl.where(ok, v, -float("inf")), 1))
    m = tl.where(seq_ok, m, 0.0)
    acc = tl.zeros([BN, BI], dtype=tl.float32)
    for j0 in range(0, K, BJ):
        j = j0 + tl.arange(0, BJ)
        ok = seq_ok[:, None] & (j[None, :] < K)
        v = tl.load(nxt[:, None] + j[None, :], mask=ok, other=0.0) + tl.load(log_B + j[None, :] * V + o[:, None], mask=ok, other=0.0)
        q = tl.where(ok, tl.exp(v - m[:, None]), 0.0)
        at_ok = (j[:, None] < K) & i_ok[None, :]
        a_t = tl.exp(tl.load(log_A + i[None, :] * K + j[:, None], mask=at_ok, other=-float("inf")))  # A^T [BJ, BI]
        acc += tl.dot(q, a_t, input_precision="ieee")
    ok = seq_ok[:, None] & i_ok[None, :]
    tl.store(beta + (seq.to(tl.int64) * seq_len + t)[:, None] * K + i[None, :], m[:, None] + tl.log(acc), mask=ok)


@triton.jit
def _step_norms(alpha, beta, log_A, log_B, obs, m1, m2, s, seq_len, K, V,
                BT: tl.constexpr, KP: tl.constexpr, BI: tl.constexpr):
    """Per (sequence, step t < T-1): m1 = max alpha_t, m2 = max v_{t+1}, s = P_t^T A Q_t."""
    n = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1) * BT + tl.arange(0, BT)
    t_ok = t < seq_len - 1
    k = tl.arange(0, KP)
    ok = t_ok[:, None] & (k[None, :] < K)
    row = (n * seq_len + t)[:, None] * K + k[None, :]
    a = tl.load(alpha + row, mask=ok, other=-float("inf"))
    o = tl.load(obs + n * seq_len + t + 1, mask=t_ok, other=0)
    v = tl.load(beta + row + K, mask=ok, other=0.0) + tl.load(log_B + k[None, :] * V + o[:, None], mask=ok, other=0.0)
    v = tl.where(ok, v, -float("inf"))
    mx1 = tl.where(t_ok, tl.max(a, 1), 0.0)
    mx2 = tl.where(t_ok, tl.max(v, 1), 0.0)
    q = tl.where(ok, tl.exp(v - mx2[:, None]), 0.0)
    total = tl.zeros([BT], dtype=tl.float32)
    for i0 in range(0, K, BI):
        i = i0 + tl.arange(0, BI)
        i_ok = i < K
        a_t = tl.exp(tl.load(log_A + i[None, :] * K + k[:, None], mask=(k[:, None] < K) & i_ok[None, :],
                             other=-float("inf")))  # A^T [KP, BI]
        aq = tl.dot(q, a_t, input_precision="ieee")  # (A Q_t)(i)
        p_ok = t_ok[:, None] & i_ok[None, :]
        p = tl.where(p_ok, tl.exp(tl.load(alpha + (n * seq_len + t)[:, None] * K + i[None, :], mask=p_ok,
                                          other=-float("inf")) - mx1[:, None]), 0.0)
        total += tl.sum(p * aq, 1)
    tl.store(m1 + n * seq_len + t, mx1, mask=t_ok)
    tl.store(m2 + n * seq_len + t, mx2, mask=t_ok)
    tl.store(s + n * seq_len + t, total, mask=t_ok)


@triton.jit
def _xi_sum(alpha, beta, log_A, log_B, obs, m1, m2, s, xi, seq_len, K, V,
            BT: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1) * BI + tl.arange(0, BI)
    j = tl.program_id(2) * BJ + tl.arange(0, BJ)
    i_ok, j_ok = i < K, j < K
    acc = tl.zeros([BI, BJ], dtype=tl.float32)
    for t0 in range(0, seq_len - 1, BT):
        t = t0 + tl.arange(0, BT)
        t_ok = t < seq_len - 1
        base = (n * seq_len + t) * K
        mx1 = tl.load(m1 + n * seq_len + t, mask=t_ok, other=0.0)
        mx2 = tl.load(m2 + n * seq_len + t, mask=t_ok, other=0.0)
        norm = tl.load(s + n * seq_len + t, mask=t_ok, other=1.0)
        pt_ok = i_ok[:, None] & t_ok[None, :]
        p_t = tl.load(alpha + base[None, :] + i[:, None], mask=pt_ok, other=-float("inf"))  # [BI, BT]
        p_t = tl.where(pt_ok, tl.exp(p_t - mx1[None, :]) / norm[None, :], 0.0)
        q_ok = t_ok[:, None] & j_ok[None, :]
        o = tl.load(obs + n * seq_len + t + 1, mask=t_ok, other=0)
        v = tl.load(beta + base[:, None] + K + j[None, :], mask=q_ok, other=0.0) + \
            tl.load(log_B + j[None, :] * V + o[:, None], mask=q_ok, other=0.0)
        q = tl.where(q_ok, tl.exp(v - mx2[:, None]), 0.0)
        acc += tl.dot(p_t, q, input_precision="ieee")
    ok = i_ok[:, None] & j_ok[None, :]
    a = tl.exp(tl.load(log_A + i[:, None] * K + j[None, :], mask=ok, other=-float("inf")))
    tl.store(xi + n * K * K + i[:, None] * K + j[None, :], a * acc, mask=ok)


@triton.jit
def _gamma_emit(alpha, beta, obs, gamma, emit, loglik, seq_len, K, V,
                BT: tl.constexpr, KP: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    kb = tl.program_id(1)
    k_all = tl.arange(0, KP)
    k = kb * BK + tl.arange(0, BK)
    k_ok = k < K
    sym = tl.arange(0, BV)
    acc = tl.zeros([BK, BV], dtype=tl.float32)
    for t0 in range(0, seq_len, BT):
        t = t0 + tl.arange(0, BT)
        t_ok = t < seq_len
        base = (n * seq_len + t) * K
        ok = t_ok[:, None] & (k_all[None, :] < K)
        full = tl.load(alpha + base[:, None] + k_all[None, :], mask=ok, other=-float("inf")) + \
            tl.load(beta + base[:, None] + k_all[None, :], mask=ok, other=0.0)
        top = tl.where(t_ok, tl.max(full, 1), 0.0)
        lse = top + tl.log(tl.sum(tl.where(ok, tl.exp(full - top[:, None]), 0.0), 1))
        blk_ok = t_ok[:, None] & k_ok[None, :]
        blk = tl.load(alpha + base[:, None] + k[None, :], mask=blk_ok, other=0.0) + \
            tl.load(beta + base[:, None] + k[None, :], mask=blk_ok, other=0.0)
        g = tl.where(blk_ok, tl.exp(blk - lse[:, None]), 0.0)
        tl.store(gamma + base[:, None] + k[None, :], g, mask=blk_ok)
        o = tl.load(obs + n * seq_len + t, mask=t_ok, other=-1)
        one_hot = tl.where((o[:, None] == sym[None, :]) & t_ok[:, None], 1.0, 0.0)
        acc += tl.dot(tl.trans(g), one_hot, input_precision="ieee")
    ok = k_ok[:, None] & (sym[None, :] < V)
    tl.store(emit + n * K * V + k[:, None] * V + sym[None, :], acc, mask=ok)
    last = tl.load(alpha + (n * seq_len + seq_len - 1) * K + k_all, mask=k_all < K, other=-float("inf"))
    top = tl.max(last, 0)
    value = top + tl.log(tl.sum(tl.exp(last - top), 0))
    tl.store(loglik + n + tl.arange(0, 1), tl.zeros([1], dtype=tl.float32) + value, mask=(tl.arange(0, 1) + kb) == 0)


def step_norms_block(kp: int) -> int:
    """BI of _step_norms, which pipelines [KP, BI] float32 tiles of A^T in 3 stages: KP BI <= 8192
    keeps them within 96 KiB, so that K = 512 fits sm_90's 227 KiB of shared memory (BI = 64 there
    needed 416 KiB); K <= 128 keeps BI = min(64, KP) as before."""
    return max(16, min(64, kp, 8192 // kp))


class ModelNew(nn.Module):
    def forward(self, log_pi, log_A, log_B, obs, lengths):
        n_seqs, seq_len = obs.shape
        K, V = log_B.shape
        dev, dt = log_B.device, log_B.dtype
        log_A, log_B, obs = log_A.contiguous(), log_B.contiguous(), obs.contiguous()
        alpha = torch.empty(n_seqs, seq_len, K, dtype=dt, device=dev)
        alpha[:, 0] = log_pi[None, :] + log_B.t()[obs[:, 0]]
        beta = torch.empty_like(alpha)
        beta[:, -1] = 0.0
        bn, bs = 16, min(64, triton.next_power_of_2(K))
        grid = (triton.cdiv(n_seqs, bn), triton.cdiv(K, bs))
        for t in range(1, seq_len):
            _forward_step[grid](alpha, log_A, log_B, obs, t, n_seqs, seq_len, K, V, BN=bn, BJ=bs, BI=bs)
        for t in range(seq_len - 2, -1, -1):
            _backward_step[grid](beta, log_A, log_B, obs, t, n_seqs, seq_len, K, V, BN=bn, BI=bs, BJ=bs)
        kp, bt = triton.next_power_of_2(K), 16
        m1 = torch.empty(n_seqs, seq_len, dtype=dt, device=dev)
        m2, s = torch.empty_like(m1), torch.empty_like(m1)
        _step_norms[(n_seqs, triton.cdiv(seq_len - 1, bt))](alpha, beta, log_A, log_B, obs, m1, m2, s, seq_len, K, V,
                                                           BT=bt, KP=kp, BI=step_norms_block(kp))
        xi = torch.empty(n_seqs, K, K, dtype=dt, device=dev)
        _xi_sum[(n_seqs, triton.cdiv(K, bs), triton.cdiv(K, bs))](alpha, beta, log_A, log_B, obs, m1, m2, s, xi,
                                                                  seq_len, K, V, BT=bt, BI=bs, BJ=bs)
        gamma = torch.empty_like(alpha)
        emit = torch.empty(n_seqs, K, V, dtype=dt, device=dev)
        loglik = torch.empty(n_seqs, dtype=dt, device=dev)
        bk = min(32, kp)
        _gamma_emit[(n_seqs, triton.cdiv(K, bk))](alpha, beta, obs, gamma, emit, loglik, seq_len, K, V, BT=bt, KP=kp,
                                                  BK=bk, BV=max(16, triton.next_power_of_2(V)))
        return gamma, xi, emit, loglik
