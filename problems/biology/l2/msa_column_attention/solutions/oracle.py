"""Oracle for biology/l2/msa_column_attention: LN + one [q; k; v; gate] GEMM, a flash-style
gated attention that walks the MSA column by strides (no transpose, no [B,R,H,S,S] logits), and
the output projection.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

C_HEAD = 32


@triton.jit
def _layer_norm_rows(x, w, b, C: tl.constexpr):
    mean = tl.sum(x, axis=1) / C
    xc = x - mean[:, None]
    var = tl.sum(xc * xc, axis=1) / C
    return xc * tl.rsqrt(var + 1e-5)[:, None] * w[None, :] + b[None, :]


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _ln_linear(x, ln_w, ln_b, w, bias, rowscale, resid, y, n_tok, n_out, k_in,
               HAS_LN: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr,
               HAS_ROWSCALE: tl.constexpr, HAS_RESID: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """y[t, n] = act(LN(x[t]) . w[n] + bias[n]) * rowscale[t] + resid[t, n]; ACT 0 none, 1 relu."""
    tok = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    tok_ok = tok < n_tok
    col_ok = cols < n_out
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    if HAS_LN:  # the whole row fits one K block (k_in == BK)
        kk = tl.arange(0, BK)
        xt = tl.load(x + tok[:, None] * k_in + kk[None, :], mask=tok_ok[:, None], other=0.0)
        xt = _layer_norm_rows(xt, tl.load(ln_w + kk), tl.load(ln_b + kk), BK)
        wt = tl.load(w + cols[None, :] * k_in + kk[:, None], mask=col_ok[None, :], other=0.0)
        acc += tl.dot(xt, wt)
    else:
        for k0 in range(0, k_in, BK):
            kk = k0 + tl.arange(0, BK)
            k_ok = kk < k_in
            xt = tl.load(x + tok[:, None] * k_in + kk[None, :], mask=tok_ok[:, None] & k_ok[None, :], other=0.0)
            wt = tl.load(w + cols[None, :] * k_in + kk[:, None], mask=col_ok[None, :] & k_ok[:, None], other=0.0)
            acc += tl.dot(xt, wt)
    if HAS_BIAS:
        acc += tl.load(bias + cols, mask=col_ok, other=0.0)[None, :]
    if ACT == 1:
        acc = tl.maximum(acc, 0.0)
    if HAS_ROWSCALE:
        acc = acc * tl.load(rowscale + tok, mask=tok_ok, other=0.0)[:, None]
    out_mask = tok_ok[:, None] & col_ok[None, :]
    if HAS_RESID:
        acc += tl.load(resid + tok[:, None] * n_out + cols[None, :], mask=out_mask, other=0.0)
    tl.store(y + tok[:, None] * n_out + cols[None, :], acc, mask=out_mask)


@triton.jit
def _gated_attention(proj, ld_proj, bias, ld_bias, bias_col, mask, out, n_rows, n_rows_total, n_keys, heads,
                     tok_b, tok_i, tok_j, bias_b, bias_q, bias_k, mask_b, mask_i, mask_k, scale,
                     HAS_BIAS: tl.constexpr, ROWS: tl.constexpr, BQ: tl.constexpr, BKEY: tl.constexpr,
                     C: tl.constexpr):
    """Row (b, i) attends over j: q/k/v/gate columns h*C of the four [*, H*C] blocks of `proj`.

    A program handles ROWS attention rows stacked along M (block-diagonal logits), so small rows
    still fill a tile; on the GPU ROWS = 1.
    """
    h = tl.program_id(2)
    cc = tl.arange(0, C)
    hc = heads * C
    mq = tl.arange(0, ROWS * BQ)
    q_row = tl.program_id(1) * ROWS + mq // BQ
    jq = tl.program_id(0) * BQ + mq % BQ
    q_ok = (jq < n_keys) & (q_row < n_rows_total)
    qb = q_row // n_rows
    qi = q_row % n_rows
    q_tok = qb * tok_b + qi * tok_i + jq * tok_j
    q = tl.load(proj + q_tok[:, None] * ld_proj + h * C + cc[None, :], mask=q_ok[:, None], other=0.0)
    mk = tl.arange(0, ROWS * BKEY)
    k_row = tl.program_id(1) * ROWS + mk // BKEY
    kb = k_row // n_rows
    ki = k_row % n_rows
    same_row = (mq // BQ)[:, None] == (mk // BKEY)[None, :]
    m_i = tl.full([ROWS * BQ], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([ROWS * BQ], dtype=tl.float32)
    acc = tl.zeros([ROWS * BQ, C], dtype=tl.float32)
    for k0 in range(0, n_keys, BKEY):
        kk = k0 + mk % BKEY
        k_ok = (kk < n_keys) & (k_row < n_rows_total)
        k_tok = kb * tok_b + ki * tok_i + kk * tok_j
        kt = tl.load(proj + k_tok[None, :] * ld_proj + hc + h * C + cc[:, None], mask=k_ok[None, :], other=0.0)
        vt = tl.load(proj + k_tok[:, None] * ld_proj + 2 * hc + h * C + cc[None, :], mask=k_ok[:, None], other=0.0)
        key_mask = tl.load(mask + kb * mask_b + ki * mask_i + kk * mask_k, mask=k_ok, other=0.0)
        logits = tl.dot(q, kt) * scale + 1e9 * (key_mask[None, :] - 1.0)
        valid = same_row & k_ok[None, :]
        if HAS_BIAS:
            b_tok = qb[:, None] * bias_b + jq[:, None] * bias_q + kk[None, :] * bias_k
            logits += tl.load(bias + b_tok * ld_bias + bias_col + h, mask=valid & q_ok[:, None], other=0.0)
        logits = tl.where(valid, logits, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(logits, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # query rows past the end see no key
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(logits - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, vt)
        m_i = m_new
    gate = _sigmoid(tl.load(proj + q_tok[:, None] * ld_proj + 3 * hc + h * C + cc[None, :],
                            mask=q_ok[:, None], other=0.0))
    o = gate * acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(out + q_tok[:, None] * hc + h * C + cc[None, :], o, mask=q_ok[:, None])


class ModelNew(nn.Module):
    def __init__(self, ln_w, ln_b, w_q, w_k, w_v, w_g, b_g, w_o, b_o):
        super().__init__()
        self.ln = (ln_w, ln_b)
        self.w_proj = torch.cat([w_q, w_k, w_v, w_g]).contiguous()
        self.b_proj = torch.cat([torch.zeros(3 * w_q.shape[0], dtype=b_g.dtype, device=b_g.device), b_g])
        self.w_o, self.b_o = w_o.contiguous(), b_o
        self.heads = w_q.shape[0] // C_HEAD

    def _linear(self, x, w, bias=None, ln=None, act=0, rowscale=None, resid=None):
        n_tok, k_in = x.shape
        n_out = w.shape[0]
        y = torch.empty(n_tok, n_out, device=x.device, dtype=torch.float32)
        on_gpu = x.is_cuda
        bm = 64 if on_gpu else 256
        bn = min(64 if on_gpu else 256, max(16, triton.next_power_of_2(n_out)))
        bk = k_in if ln is not None else (32 if on_gpu else 256)
        ln_w, ln_b = ln if ln is not None else (w, w)
        _ln_linear[(triton.cdiv(n_tok, bm), triton.cdiv(n_out, bn))](
            x, ln_w, ln_b, w, bias if bias is not None else w, rowscale if rowscale is not None else w,
            resid if resid is not None else y, y, n_tok, n_out, k_in,
            HAS_LN=ln is not None, HAS_BIAS=bias is not None, ACT=act, HAS_ROWSCALE=rowscale is not None,
            HAS_RESID=resid is not None, BM=bm, BN=bn, BK=bk)
        return y

    def forward(self, m, msa_mask):
        batch, n_seq, n_res, cm = m.shape
        sr = n_seq * n_res
        proj = self._linear(m.reshape(-1, cm).contiguous(), self.w_proj, self.b_proj, ln=self.ln)
        o = torch.empty(batch * sr, self.heads * C_HEAD, device=m.device, dtype=torch.float32)
        on_gpu = m.is_cuda
        bq = 64 if on_gpu else max(16, triton.next_power_of_2(n_seq))
        rows = 1 if on_gpu else max(1, 512 // bq)
        total = batch * n_res
        # row (b, r) attends over sequences s: token = b*S*R + s*R + r
        _gated_attention[(triton.cdiv(n_seq, bq), triton.cdiv(total, rows), self.heads)](
            proj, proj.shape[1], proj, proj.shape[1], 0, msa_mask.contiguous(), o, n_res, total, n_seq, self.heads,
            sr, 1, n_res, 0, 0, 0, sr, 1, n_res, C_HEAD ** -0.5,
            HAS_BIAS=False, ROWS=rows, BQ=bq, BKEY=bq, C=C_HEAD)
        return self._linear(o, self.w_o, self.b_o).view(batch, n_seq, n_res, cm)
