"""Oracle for biology/l3/evoformer_block: the block as 25 fused Triton launches.

- `_ln_linear`: LayerNorm prologue + GEMM + bias/ReLU/row-mask/residual epilogue, used for every
  projection, both transitions and all output projections (the residual add is fused).
- `_gated_attention`: flash-style attention with online softmax, the pair bias and key mask added
  to the logits, and the sigmoid gate applied on the way out. Row, column, starting-node and
  ending-node attentions are the same kernel with different token strides: nothing is transposed.
- triangle updates: LN + a/b projections written channel-major, a batched GEMM per channel, and an
  LN + gate + output-projection + residual epilogue.
- outer product mean: one GEMM over the MSA depth per residue-block pair, then a kernel that
  flattens the 32 x 32 outer product, projects it, divides by the mask count and adds z.
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


@triton.jit
def _project_ab(z, mask, ln_w, ln_b, w_ab, b_ab, a_out, b_out, n_tok, rr,
                CZ: tl.constexpr, HID: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    tok = tl.program_id(0) * BM + tl.arange(0, BM)
    ch = tl.program_id(1) * BN + tl.arange(0, BN)
    kz = tl.arange(0, CZ)
    tok_ok = tok < n_tok
    x = tl.load(z + tok[:, None] * CZ + kz[None, :], mask=tok_ok[:, None], other=0.0)
    zh = _layer_norm_rows(x, tl.load(ln_w + kz), tl.load(ln_b + kz), CZ)
    m = tl.load(mask + tok, mask=tok_ok, other=0.0)[:, None]
    w_ptr = w_ab + ch[None, :] * CZ + kz[:, None]
    ag = tl.dot(zh, tl.load(w_ptr)) + tl.load(b_ab + ch)[None, :]
    ap = tl.dot(zh, tl.load(w_ptr + HID * CZ)) + tl.load(b_ab + HID + ch)[None, :]
    bg = tl.dot(zh, tl.load(w_ptr + 2 * HID * CZ)) + tl.load(b_ab + 2 * HID + ch)[None, :]
    bp = tl.dot(zh, tl.load(w_ptr + 3 * HID * CZ)) + tl.load(b_ab + 3 * HID + ch)[None, :]
    bidx = tok // rr
    dst = bidx[:, None] * (HID * rr) + ch[None, :] * rr + (tok - bidx * rr)[:, None]
    tl.store(a_out + dst, m * _sigmoid(ag) * ap, mask=tok_ok[:, None])
    tl.store(b_out + dst, m * _sigmoid(bg) * bp, mask=tok_ok[:, None])


@triton.jit
def _triangle_gemm(a, b, x, n_res, n_planes, sa_i, sa_k, sb_k, sb_j,
                   BI: tl.constexpr, BJ: tl.constexpr, BK: tl.constexpr, PLANES: tl.constexpr):
    tiles_j = tl.cdiv(n_res, BJ)
    i = (tl.program_id(0) // tiles_j) * BI + tl.arange(0, BI)
    j = (tl.program_id(0) % tiles_j) * BJ + tl.arange(0, BJ)
    for p in range(0, PLANES):
        plane = tl.program_id(1) * PLANES + p
        base = plane.to(tl.int64) * n_res * n_res
        i_lim = tl.where(plane < n_planes, n_res, 0)
        acc = tl.zeros([BI, BJ], dtype=tl.float32)
        for k0 in range(0, n_res, BK):
            k = k0 + tl.arange(0, BK)
            at = tl.load(a + base + i[:, None] * sa_i + k[None, :] * sa_k,
                         mask=(i[:, None] < i_lim) & (k[None, :] < n_res), other=0.0)
            bt = tl.load(b + base + k[:, None] * sb_k + j[None, :] * sb_j,
                         mask=(k[:, None] < n_res) & (j[None, :] < i_lim), other=0.0)
            acc += tl.dot(at, bt)
        tl.store(x + base + i[:, None] * n_res + j[None, :], acc, mask=(i[:, None] < i_lim) & (j[None, :] < n_res))


@triton.jit
def _triangle_out(z, x, ln_w, ln_b, w_g, b_g, lno_w, lno_b, w_o, b_o, out, n_tok, rr,
                  CZ: tl.constexpr, HID: tl.constexpr, BM: tl.constexpr):
    """out = z + sigmoid(LN(z) W_g^T + b_g) * (LN(x) W_o^T + b_o), x read channel-major."""
    tok = tl.program_id(0) * BM + tl.arange(0, BM)
    kz = tl.arange(0, CZ)
    kh = tl.arange(0, HID)
    tok_ok = tok < n_tok
    zt = tl.load(z + tok[:, None] * CZ + kz[None, :], mask=tok_ok[:, None], other=0.0)
    zh = _layer_norm_rows(zt, tl.load(ln_w + kz), tl.load(ln_b + kz), CZ)
    gate = _sigmoid(tl.dot(zh, tl.load(w_g + kz[None, :] * CZ + kz[:, None])) + tl.load(b_g + kz)[None, :])
    bidx = tok // rr
    xt = tl.load(x + bidx[:, None] * (HID * rr) + kh[None, :] * rr + (tok - bidx * rr)[:, None],
                 mask=tok_ok[:, None], other=0.0)
    xn = _layer_norm_rows(xt, tl.load(lno_w + kh), tl.load(lno_b + kh), HID)
    y = (tl.dot(xn, tl.load(w_o + kz[None, :] * HID + kh[:, None])) + tl.load(b_o + kz)[None, :]) * gate
    tl.store(out + tok[:, None] * CZ + kz[None, :], zt + y, mask=tok_ok[:, None])


@triton.jit
def _opm_outer(ab, outer, n_seq, n_res, BI: tl.constexpr, BJ: tl.constexpr, BS: tl.constexpr,
               C: tl.constexpr):
    """outer[b, i*C + c, j*C + d] = sum_s a[b, s, i, c] * b[b, s, j, d], with ab = [a | b] rows of 2C."""
    tiles_j = tl.cdiv(n_res, BJ)
    bt = tl.program_id(1)
    mm = (tl.program_id(0) // tiles_j) * BI * C + tl.arange(0, BI * C)
    nn_ = (tl.program_id(0) % tiles_j) * BJ * C + tl.arange(0, BJ * C)
    m_ok = mm < n_res * C
    n_ok = nn_ < n_res * C
    a_off = (mm // C) * (2 * C) + mm % C
    b_off = (nn_ // C) * (2 * C) + C + nn_ % C
    base = ab + bt.to(tl.int64) * n_seq * n_res * 2 * C
    acc = tl.zeros([BI * C, BJ * C], dtype=tl.float32)
    for s0 in range(0, n_seq, BS):
        s = s0 + tl.arange(0, BS)
        s_ok = s < n_seq
        at = tl.load(base + s[None, :] * (n_res * 2 * C) + a_off[:, None], mask=m_ok[:, None] & s_ok[None, :], other=0.0)
        btile = tl.load(base + s[:, None] * (n_res * 2 * C) + b_off[None, :], mask=s_ok[:, None] & n_ok[None, :], other=0.0)
        acc += tl.dot(at, btile)
    dst = outer + bt.to(tl.int64) * n_res * C * n_res * C + mm[:, None] * (n_res * C) + nn_[None, :]
    tl.store(dst, acc, mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _opm_project(outer, msa_mask, w, bias, z, out, n_seq, n_res, n_tok,
                 CZ: tl.constexpr, C: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, BS: tl.constexpr):
    """out[b,i,j] = z[b,i,j] + (flatten(outer[b,i,:,j,:]) . W^T) / (1e-3 + sum_s mask_si mask_sj) + bias."""
    tok = tl.program_id(0) * BM + tl.arange(0, BM)
    tok_ok = tok < n_tok
    rr = n_res * n_res
    bt = tok // rr
    i = (tok % rr) // n_res
    j = tok % n_res
    kz = tl.arange(0, CZ)
    row_base = bt.to(tl.int64) * rr * C * C + i * (C * n_res * C) + j * C
    acc = tl.zeros([BM, CZ], dtype=tl.float32)
    for k0 in range(0, C * C, BK):
        kk = k0 + tl.arange(0, BK)
        pt = tl.load(outer + row_base[:, None] + (kk // C)[None, :] * (n_res * C) + (kk % C)[None, :],
                     mask=tok_ok[:, None], other=0.0)
        acc += tl.dot(pt, tl.load(w + kz[None, :] * (C * C) + kk[:, None]))
    count = tl.zeros([BM], dtype=tl.float32)
    for s0 in range(0, n_seq, BS):
        s = s0 + tl.arange(0, BS)
        ok = tok_ok[:, None] & (s[None, :] < n_seq)
        mrow = msa_mask + bt[:, None] * (n_seq * n_res) + s[None, :] * n_res
        count += tl.sum(tl.load(mrow + i[:, None], mask=ok, other=0.0) * tl.load(mrow + j[:, None], mask=ok, other=0.0), axis=1)
    zt = tl.load(z + tok[:, None] * CZ + kz[None, :], mask=tok_ok[:, None], other=0.0)
    y = zt + acc / (1e-3 + count)[:, None] + tl.load(bias + kz)[None, :]
    tl.store(out + tok[:, None] * CZ + kz[None, :], y, mask=tok_ok[:, None])


class ModelNew(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        self.p = dict(weights)
        p = self.p
        for name in ("row", "col", "tri_start", "tri_end"):  # one projection: [q; k; v; gate (; bias)]
            extra = [p[name + "_bias_w"]] if name.startswith("tri") else []
            p[name + "_proj_w"] = torch.cat([p[name + "_qkv_w"], p[name + "_gate_w"]] + extra).contiguous()
            n_qkv = p[name + "_qkv_w"].shape[0]
            p[name + "_proj_b"] = torch.cat([torch.zeros(n_qkv, dtype=p[name + "_gate_b"].dtype, device=p[name + "_gate_b"].device),
                                             p[name + "_gate_b"]] + [torch.zeros_like(e[:, 0]) for e in extra])

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

    def _ln(self, name):
        return self.p[name + "_ln_w"], self.p[name + "_ln_b"]

    def _attention(self, name, x, heads, mask, layout, bias=None):
        """layout: (n_batch_rows, n_rows, n_keys, tok strides b/i/j, mask strides b/i/k, bias strides b/q/k)."""
        p = self.p
        (n_rows, n_keys, tok, mstr, bstr) = layout
        batch = mask.shape[0]
        proj = self._linear(x, p[name + "_proj_w"], p[name + "_proj_b"], ln=self._ln(name))
        out = torch.empty(x.shape[0], heads * C_HEAD, device=x.device, dtype=torch.float32)
        if bias is None:  # bias from the own projection (columns after q, k, v, gate)
            bias_buf, bias_col = proj, 4 * heads * C_HEAD
        else:
            bias_buf, bias_col = bias, 0
        on_gpu = x.is_cuda
        bq = 64 if on_gpu else max(16, triton.next_power_of_2(n_keys))
        rows = 1 if on_gpu else max(1, 256 // bq)
        total = batch * n_rows
        _gated_attention[(triton.cdiv(n_keys, bq), triton.cdiv(total, rows), heads)](
            proj, proj.shape[1], bias_buf, bias_buf.shape[1], bias_col, mask, out, n_rows, total, n_keys, heads,
            *tok, *bstr, *mstr, C_HEAD ** -0.5, HAS_BIAS=bstr != (0, 0, 0), ROWS=rows, BQ=bq,
            BKEY=64 if on_gpu else max(16, triton.next_power_of_2(n_keys)), C=C_HEAD)
        return self._linear(out, p[name + "_out_w"], p[name + "_out_b"], resid=x)

    def _triangle(self, name, z, pair_mask, outgoing):
        p = self.p
        batch, n_res = pair_mask.shape[0], pair_mask.shape[1]
        cz = z.shape[1]
        hid = p[name + "_o_w"].shape[1]
        n_tok, rr = z.shape[0], n_res * n_res
        a = torch.empty(batch, hid, n_res, n_res, device=z.device, dtype=torch.float32)
        b, x, out = torch.empty_like(a), torch.empty_like(a), torch.empty_like(z)
        on_gpu = z.is_cuda
        bm, bn = (64, 32) if on_gpu else (256, hid)
        planes = 1 if on_gpu else 16
        _project_ab[(triton.cdiv(n_tok, bm), hid // bn)](
            z, pair_mask, p[name + "_ln_w"], p[name + "_ln_b"], p[name + "_ab_w"], p[name + "_ab_b"], a, b,
            n_tok, rr, CZ=cz, HID=hid, BM=bm, BN=bn)
        strides = (n_res, 1, 1, n_res) if outgoing else (1, n_res, n_res, 1)
        _triangle_gemm[(triton.cdiv(n_res, 64) ** 2, triton.cdiv(batch * hid, planes))](
            a, b, x, n_res, batch * hid, *strides, BI=64, BJ=64, BK=32 if on_gpu else 64, PLANES=planes)
        _triangle_out[(triton.cdiv(n_tok, bm),)](
            z, x, p[name + "_ln_w"], p[name + "_ln_b"], p[name + "_g_w"], p[name + "_g_b"], p[name + "_lnx_w"],
            p[name + "_lnx_b"], p[name + "_o_w"], p[name + "_o_b"], out, n_tok, rr, CZ=cz, HID=hid, BM=bm)
        return out

    def _outer_product_mean(self, m, z, msa_mask, batch, n_seq, n_res):
        p = self.p
        c = p["opm_ab_w"].shape[0] // 2
        ab = self._linear(m, p["opm_ab_w"], p["opm_ab_b"], ln=self._ln("opm"), rowscale=msa_mask)
        outer = torch.empty(batch, n_res * c, n_res * c, device=m.device, dtype=torch.float32)
        on_gpu = m.is_cuda
        blk = 2 if on_gpu else 8
        _opm_outer[(triton.cdiv(n_res, blk) ** 2, batch)](ab, outer, n_seq, n_res, BI=blk, BJ=blk, BS=16, C=c)
        out = torch.empty_like(z)
        bm = 32 if on_gpu else 256
        _opm_project[(triton.cdiv(z.shape[0], bm),)](
            outer, msa_mask, p["opm_out_w"], p["opm_out_b"], z, out, n_seq, n_res, z.shape[0],
            CZ=z.shape[1], C=c, BM=bm, BK=64, BS=16)
        return out

    def forward(self, m, z, msa_mask, pair_mask):
        p = self.p
        batch, n_seq, n_res, cm = m.shape
        cz = z.shape[-1]
        msa_mask, pair_mask = msa_mask.contiguous(), pair_mask.contiguous()
        mt = m.reshape(-1, cm).contiguous()
        zt = z.reshape(-1, cz).contiguous()
        sr, rr = n_seq * n_res, n_res * n_res
        # MSA row attention with pair bias (Alg. 7): row s attends over residues
        zbias = self._linear(zt, p["row_bias_w"], ln=self._ln("row_bias"))
        mt = self._attention("row", mt, 8, msa_mask,
                             (n_seq, n_res, (sr, n_res, 1), (sr, n_res, 1), (rr, n_res, 1)), bias=zbias)
        # MSA column attention (Alg. 8): residue r attends over sequences
        mt = self._attention("col", mt, 8, msa_mask, (n_res, n_seq, (sr, 1, n_res), (sr, 1, n_res), (0, 0, 0)))
        hidden = self._linear(mt, p["msa_tr_w1"], p["msa_tr_b1"], ln=self._ln("msa_tr"), act=1)
        mt = self._linear(hidden, p["msa_tr_w2"], p["msa_tr_b2"], resid=mt)
        zt = self._outer_product_mean(mt, zt, msa_mask, batch, n_seq, n_res)
        zt = self._triangle("tri_out", zt, pair_mask, outgoing=True)
        zt = self._triangle("tri_in", zt, pair_mask, outgoing=False)
        zt = self._attention("tri_start", zt, 4, pair_mask,
                             (n_res, n_res, (rr, n_res, 1), (rr, n_res, 1), (rr, n_res, 1)))
        # ending node: row i of z^T is column i of z; bias[j,k] of z^T is bias[k,j] of z; mask^T likewise
        zt = self._attention("tri_end", zt, 4, pair_mask,
                             (n_res, n_res, (rr, 1, n_res), (rr, 1, n_res), (rr, 1, n_res)))
        hidden = self._linear(zt, p["pair_tr_w1"], p["pair_tr_b1"], ln=self._ln("pair_tr"), act=1)
        zt = self._linear(hidden, p["pair_tr_w2"], p["pair_tr_b2"], resid=zt)
        return mt.view(batch, n_seq, n_res, cm), zt.view(batch, n_res, n_res, cz)
