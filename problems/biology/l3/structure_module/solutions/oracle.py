"""Oracle for biology/l3/structure_module: the IPA oracle's kernels inside the 8-iteration loop.

Per iteration: one projection GEMM, the two-pass IPA attention (point term as an extra IEEE dot),
the per-residue o_pair GEMM, the output projection with the residual fused, LayerNorms as single
passes, the 3-layer transition as GEMMs with fused bias/ReLU/residual, and one kernel that turns
the backbone update into a quaternion rotation and composes every frame.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

C_S, C_Z, HEADS, C_HEAD, N_QP, N_PV = 384, 128, 12, 16, 4, 8
C_OUT = HEADS * (C_HEAD + 4 * N_PV + C_Z)
N_ITER = 8


@triton.jit
def _linear(x, w, bias, resid, y, n_tok, n_out, k_in, HAS_BIAS: tl.constexpr, RELU: tl.constexpr,
            HAS_RESID: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tok = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    tok_ok = tok < n_tok
    col_ok = cols < n_out
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, k_in, BK):
        kk = k0 + tl.arange(0, BK)
        k_ok = kk < k_in
        xt = tl.load(x + tok[:, None].to(tl.int64) * k_in + kk[None, :], mask=tok_ok[:, None] & k_ok[None, :], other=0.0)
        wt = tl.load(w + cols[None, :] * k_in + kk[:, None], mask=col_ok[None, :] & k_ok[:, None], other=0.0)
        acc += tl.dot(xt, wt, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(bias + cols, mask=col_ok, other=0.0)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    out_mask = tok_ok[:, None] & col_ok[None, :]
    if HAS_RESID:
        acc += tl.load(resid + tok[:, None].to(tl.int64) * n_out + cols[None, :], mask=out_mask, other=0.0)
    tl.store(y + tok[:, None].to(tl.int64) * n_out + cols[None, :], acc, mask=out_mask)


@triton.jit
def _layer_norm(x, w, b, y, n_tok, C: tl.constexpr, CP: tl.constexpr, BM: tl.constexpr):
    tok = tl.program_id(0) * BM + tl.arange(0, BM)
    cc = tl.arange(0, CP)  # C padded to a power of two
    c_ok = cc < C
    ok = (tok < n_tok)[:, None] & c_ok[None, :]
    v = tl.load(x + tok[:, None].to(tl.int64) * C + cc[None, :], mask=ok, other=0.0)
    mean = tl.sum(v, axis=1) / C
    vc = tl.where(c_ok[None, :], v - mean[:, None], 0.0)
    var = tl.sum(vc * vc, axis=1) / C
    out = vc * tl.rsqrt(var + 1e-5)[:, None] * tl.load(w + cc, mask=c_ok, other=0.0)[None, :] \
        + tl.load(b + cc, mask=c_ok, other=0.0)[None, :]
    tl.store(y + tok[:, None].to(tl.int64) * C + cc[None, :], out, mask=ok)


@triton.jit
def _compose_frames(upd, rot, trans, n_tok, BLOCK: tl.constexpr):
    """trans <- R t + trans; R <- R R_u with R_u from the normalised quaternion (1, b, c, d)."""
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = r < n_tok
    qb = tl.load(upd + r * 6, mask=ok, other=0.0)
    qc = tl.load(upd + r * 6 + 1, mask=ok, other=0.0)
    qd = tl.load(upd + r * 6 + 2, mask=ok, other=0.0)
    t0 = tl.load(upd + r * 6 + 3, mask=ok, other=0.0)
    t1 = tl.load(upd + r * 6 + 4, mask=ok, other=0.0)
    t2 = tl.load(upd + r * 6 + 5, mask=ok, other=0.0)
    norm = tl.sqrt(1.0 + qb * qb + qc * qc + qd * qd)
    a, b, c, d = 1.0 / norm, qb / norm, qc / norm, qd / norm
    u00 = a * a + b * b - c * c - d * d
    u01 = 2 * (b * c - a * d)
    u02 = 2 * (b * d + a * c)
    u10 = 2 * (b * c + a * d)
    u11 = a * a - b * b + c * c - d * d
    u12 = 2 * (c * d - a * b)
    u20 = 2 * (b * d - a * c)
    u21 = 2 * (c * d + a * b)
    u22 = a * a - b * b - c * c + d * d
    for row in tl.static_range(3):
        r0 = tl.load(rot + r * 9 + row * 3, mask=ok, other=0.0)
        r1 = tl.load(rot + r * 9 + row * 3 + 1, mask=ok, other=0.0)
        r2 = tl.load(rot + r * 9 + row * 3 + 2, mask=ok, other=0.0)
        tv = tl.load(trans + r * 3 + row, mask=ok, other=0.0)
        tl.store(trans + r * 3 + row, r0 * t0 + r1 * t1 + r2 * t2 + tv, mask=ok)
        tl.store(rot + r * 9 + row * 3, r0 * u00 + r1 * u10 + r2 * u20, mask=ok)
        tl.store(rot + r * 9 + row * 3 + 1, r0 * u01 + r1 * u11 + r2 * u21, mask=ok)
        tl.store(rot + r * 9 + row * 3 + 2, r0 * u02 + r1 * u12 + r2 * u22, mask=ok)


@triton.jit
def _ipa_attention(proj, ld_proj, qg, kg, vg, pair_bias, mask, rot, trans, gamma_w, attn, feats, n_res,
                   w_l, w_c, BQ: tl.constexpr, BK: tl.constexpr, C: tl.constexpr, H: tl.constexpr,
                   NPV: tl.constexpr, P16: tl.constexpr):
    b = tl.program_id(1)
    h = tl.program_id(2)
    i = tl.program_id(0) * BQ + tl.arange(0, BQ)
    i_ok = i < n_res
    cc = tl.arange(0, C)
    pp = tl.arange(0, P16)
    tok_i = b * n_res + i
    q = tl.load(proj + tok_i[:, None] * ld_proj + h * C + cc[None, :], mask=i_ok[:, None], other=0.0)
    qpt = tl.load(qg + (tok_i[:, None] * H + h) * P16 + pp[None, :], mask=i_ok[:, None], other=0.0)
    gamma = tl.load(gamma_w + h)
    coef = w_l * gamma * w_c * 0.5
    q_sq = tl.sum(qpt * qpt, axis=1)
    q = q * (w_l / tl.sqrt(C * 1.0))

    # pass 1: row max and normalizer
    m_i = tl.full([BQ], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BQ], dtype=tl.float32)
    for j0 in range(0, n_res, BK):
        j = j0 + tl.arange(0, BK)
        logits = _ipa_logits(proj, ld_proj, kg, pair_bias, mask, b, h, i, i_ok, j, n_res, q, qpt, q_sq,
                             coef, w_l, cc, pp, C, H, P16)
        m_new = tl.maximum(m_i, tl.max(logits, axis=1))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(logits - m_new[:, None]), axis=1)
        m_i = m_new
    # pass 2: normalized weights, o and the global v-point sums
    acc = tl.zeros([BQ, C], dtype=tl.float32)
    ax = tl.zeros([BQ, P16], dtype=tl.float32)
    ay = tl.zeros([BQ, P16], dtype=tl.float32)
    az = tl.zeros([BQ, P16], dtype=tl.float32)
    for j0 in range(0, n_res, BK):
        j = j0 + tl.arange(0, BK)
        j_ok = j < n_res
        logits = _ipa_logits(proj, ld_proj, kg, pair_bias, mask, b, h, i, i_ok, j, n_res, q, qpt, q_sq,
                             coef, w_l, cc, pp, C, H, P16)
        a = tl.exp(logits - m_i[:, None]) / l_i[:, None]
        tl.store(attn + ((b * H + h) * n_res + i[:, None]).to(tl.int64) * n_res + j[None, :], a,
                 mask=i_ok[:, None] & j_ok[None, :])
        tok_j = b * n_res + j
        v = tl.load(proj + tok_j[:, None] * ld_proj + 2 * H * C + h * C + cc[None, :], mask=j_ok[:, None], other=0.0)
        acc += tl.dot(a, v, input_precision="ieee")
        vbase = vg + ((tok_j[:, None] * H + h) * 3) * P16 + pp[None, :]
        ax += tl.dot(a, tl.load(vbase, mask=j_ok[:, None], other=0.0), input_precision="ieee")
        ay += tl.dot(a, tl.load(vbase + P16, mask=j_ok[:, None], other=0.0), input_precision="ieee")
        az += tl.dot(a, tl.load(vbase + 2 * P16, mask=j_ok[:, None], other=0.0), input_precision="ieee")
    # back to the local frame of residue i: R_i^T (x - t_i)
    r = rot + tok_i * 9
    tx = tl.load(trans + tok_i * 3 + 0, mask=i_ok, other=0.0)[:, None]
    ty = tl.load(trans + tok_i * 3 + 1, mask=i_ok, other=0.0)[:, None]
    tz = tl.load(trans + tok_i * 3 + 2, mask=i_ok, other=0.0)[:, None]
    gx, gy, gz = ax - tx, ay - ty, az - tz
    lx = tl.load(r + 0, mask=i_ok, other=0.0)[:, None] * gx + tl.load(r + 3, mask=i_ok, other=0.0)[:, None] * gy \
        + tl.load(r + 6, mask=i_ok, other=0.0)[:, None] * gz
    ly = tl.load(r + 1, mask=i_ok, other=0.0)[:, None] * gx + tl.load(r + 4, mask=i_ok, other=0.0)[:, None] * gy \
        + tl.load(r + 7, mask=i_ok, other=0.0)[:, None] * gz
    lz = tl.load(r + 2, mask=i_ok, other=0.0)[:, None] * gx + tl.load(r + 5, mask=i_ok, other=0.0)[:, None] * gy \
        + tl.load(r + 8, mask=i_ok, other=0.0)[:, None] * gz
    norm = tl.sqrt(1e-8 + lx * lx + ly * ly + lz * lz)
    row = feats + tok_i[:, None].to(tl.int64) * (H * (C + 4 * NPV + 128))
    tl.store(row + h * C + cc[None, :], acc, mask=i_ok[:, None])
    pt_ok = i_ok[:, None] & (pp[None, :] < NPV)
    base = H * C + h * NPV + pp[None, :]
    tl.store(row + base, lx, mask=pt_ok)
    tl.store(row + base + H * NPV, ly, mask=pt_ok)
    tl.store(row + base + 2 * H * NPV, lz, mask=pt_ok)
    tl.store(row + base + 3 * H * NPV, norm, mask=pt_ok)


@triton.jit
def _ipa_logits(proj, ld_proj, kg, pair_bias, mask, b, h, i, i_ok, j, n_res, q, qpt, q_sq, coef, w_l, cc, pp,
                C: tl.constexpr, H: tl.constexpr, P16: tl.constexpr):
    j_ok = j < n_res
    tok_j = b * n_res + j
    kt = tl.load(proj + tok_j[None, :] * ld_proj + H * C + h * C + cc[:, None], mask=j_ok[None, :], other=0.0)
    kpt = tl.load(kg + (tok_j[None, :] * H + h) * P16 + pp[:, None], mask=j_ok[None, :], other=0.0)
    k_sq = tl.sum(kpt * kpt, axis=0)
    dist2 = q_sq[:, None] + k_sq[None, :] - 2.0 * tl.dot(qpt, kpt, input_precision="ieee")
    bias = tl.load(pair_bias + ((b * n_res + i[:, None]).to(tl.int64) * n_res + j[None, :]) * H + h,
                   mask=i_ok[:, None] & j_ok[None, :], other=0.0)
    key_mask = tl.load(mask + b * n_res + j, mask=j_ok, other=0.0)
    logits = tl.dot(q, kt, input_precision="ieee") + w_l * bias - coef * dist2 + 1e9 * (key_mask[None, :] - 1.0)
    return tl.where(j_ok[None, :], logits, float("-inf"))


@triton.jit
def _pair_output(attn, z, feats, n_res, H: tl.constexpr, HP: tl.constexpr, CZ: tl.constexpr,
                 C: tl.constexpr, NPV: tl.constexpr, BJ: tl.constexpr, ROWS: tl.constexpr):
    """o_pair[b, i, h, :] = sum_j attn[b, h, i, j] z[b, i, j, :]: a [H x J] @ [J x CZ] product per residue."""
    b = tl.program_id(1)
    hh = tl.arange(0, HP)
    cz = tl.arange(0, CZ)
    for r in range(0, ROWS):
        i = tl.program_id(0) * ROWS + r
        h_lim = tl.where(i < n_res, H, 0)  # rows past the end are fully masked
        acc = tl.zeros([HP, CZ], dtype=tl.float32)
        for j0 in range(0, n_res, BJ):
            j = j0 + tl.arange(0, BJ)
            j_ok = j < n_res
            a = tl.load(attn + ((b * H + hh[:, None]) * n_res + i).to(tl.int64) * n_res + j[None, :],
                        mask=(hh[:, None] < h_lim) & j_ok[None, :], other=0.0)
            zt = tl.load(z + ((b * n_res + i) * n_res + j[:, None]).to(tl.int64) * CZ + cz[None, :],
                         mask=j_ok[:, None] & (j[:, None] < h_lim * n_res), other=0.0)
            acc += tl.dot(a, zt, input_precision="ieee")
        row = feats + (b * n_res + i).to(tl.int64) * (H * (C + 4 * NPV + CZ)) + H * (C + 4 * NPV)
        tl.store(row + hh[:, None] * CZ + cz[None, :], acc, mask=hh[:, None] < h_lim)


class ModelNew(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        self.p = {k: v.contiguous() for k, v in weights.items()}
        p = self.p
        self.w_proj = torch.cat([p["ipa_w_" + k] for k in ("q", "k", "v", "qp", "kp", "vp")]).contiguous()
        self.gamma = torch.nn.functional.softplus(p["ipa_head_weights"]).contiguous()

    def _gemm(self, x, w, bias=None, relu=False, resid=None):
        n_tok, k_in = x.shape
        n_out = w.shape[0]
        y = torch.empty(n_tok, n_out, device=x.device, dtype=torch.float32)
        on_gpu = x.is_cuda
        bm, bn, bk = (64, 64, 32) if on_gpu else (512, 512, 128)
        bn = min(bn, max(16, triton.next_power_of_2(n_out)))
        _linear[(triton.cdiv(n_tok, bm), triton.cdiv(n_out, bn))](
            x, w, bias if bias is not None else w, resid if resid is not None else y, y, n_tok, n_out, k_in,
            HAS_BIAS=bias is not None, RELU=relu, HAS_RESID=resid is not None, BM=bm, BN=bn, BK=bk)
        return y

    def _ln(self, x, name):
        y = torch.empty_like(x)
        bm = 32 if x.is_cuda else 1024
        _layer_norm[(triton.cdiv(x.shape[0], bm),)](x, self.p[name + "_w"], self.p[name + "_b"], y, x.shape[0],
                                                    C=x.shape[1], CP=triton.next_power_of_2(x.shape[1]), BM=bm)
        return y

    @staticmethod
    def _global_points(local, rot, trans, n_pts, d_major):
        batch, n_res = rot.shape[:2]
        pts = local.view(batch, n_res, HEADS, n_pts, 3)
        g = torch.einsum("brde,brhpe->brhpd", rot, pts) + trans[:, :, None, None, :]
        if d_major:  # [B, R, H, 3, 16]: one 16-lane row of points per coordinate
            out = torch.zeros(batch, n_res, HEADS, 3, 16, device=rot.device, dtype=torch.float32)
            out[..., :n_pts] = g.transpose(-1, -2)
        else:        # [B, R, H, 16]: (point, xyz) flattened into 12 of 16 lanes
            out = torch.zeros(batch, n_res, HEADS, 16, device=rot.device, dtype=torch.float32)
            out[..., :n_pts * 3] = g.flatten(-2)
        return out

    def _ipa(self, s, z_hat, pair_bias, rot, trans, mask, batch, n_res):
        hc = HEADS * C_HEAD
        proj = self._gemm(s, self.w_proj)
        n_qp = HEADS * N_QP * 3
        qg = self._global_points(proj[:, 3 * hc:3 * hc + n_qp], rot, trans, N_QP, False)
        kg = self._global_points(proj[:, 3 * hc + n_qp:3 * hc + 2 * n_qp], rot, trans, N_QP, False)
        vg = self._global_points(proj[:, 3 * hc + 2 * n_qp:], rot, trans, N_PV, True)
        attn = torch.empty(batch, HEADS, n_res, n_res, device=s.device, dtype=torch.float32)
        feats = torch.empty(batch * n_res, C_OUT, device=s.device, dtype=torch.float32)
        on_gpu = s.is_cuda
        bq = 32 if on_gpu else max(16, triton.next_power_of_2(n_res))
        _ipa_attention[(triton.cdiv(n_res, bq), batch, HEADS)](
            proj, proj.shape[1], qg, kg, vg, pair_bias, mask, rot, trans, self.gamma, attn, feats,
            n_res, math.sqrt(1.0 / 3.0), math.sqrt(2.0 / (9.0 * N_QP)), BQ=bq, BK=bq if not on_gpu else 32,
            C=C_HEAD, H=HEADS, NPV=N_PV, P16=16)
        rows = 1 if on_gpu else 16
        _pair_output[(triton.cdiv(n_res, rows), batch)](
            attn, z_hat, feats, n_res, H=HEADS, HP=16, CZ=C_Z, C=C_HEAD, NPV=N_PV,
            BJ=64 if on_gpu else max(16, triton.next_power_of_2(n_res)), ROWS=rows)
        return self._gemm(feats, self.p["ipa_w_out"], self.p["ipa_b_out"], resid=s)

    def forward(self, s_init, z, mask):
        p = self.p
        batch, n_res, _ = s_init.shape
        n_tok = batch * n_res
        s = self._gemm(self._ln(s_init.reshape(n_tok, C_S).contiguous(), "ln_s_init"), p["w_in"], p["b_in"])
        z_hat = self._ln(z.reshape(-1, C_Z).contiguous(), "ln_z")
        pair_bias = self._gemm(z_hat, p["ipa_w_b"])
        rot = torch.eye(3, device=s.device, dtype=torch.float32).expand(batch, n_res, 3, 3).contiguous()
        trans = torch.zeros(batch, n_res, 3, device=s.device, dtype=torch.float32)
        mask = mask.contiguous()
        for _ in range(N_ITER):
            s = self._ln(self._ipa(s, z_hat, pair_bias, rot, trans, mask, batch, n_res), "ln_ipa")
            h = self._gemm(s, p["tr_w1"], p["tr_b1"], relu=True)
            h = self._gemm(h, p["tr_w2"], p["tr_b2"], relu=True)
            s = self._ln(self._gemm(h, p["tr_w3"], p["tr_b3"], resid=s), "ln_tr")
            upd = self._gemm(s, p["bb_w"], p["bb_b"])
            _compose_frames[(triton.cdiv(n_tok, 256),)](upd, rot, trans, n_tok, BLOCK=256)
        return s.view(batch, n_res, C_S), rot, trans
