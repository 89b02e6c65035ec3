"""biology/l2/invariant_point_attention: AlphaFold2 Alg. 22 (IPA), eval mode.

Local points are the projection reshaped to [..., H, P, 3] (xyz last). Translations are in
AlphaFold's internal nanometre-like units (C-alpha spacing 0.38).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

C_S, C_Z, HEADS, C_HEAD, N_QP, N_PV = 384, 128, 12, 16, 4, 8
ROW_CHUNK = 128  # query rows per chunk: bounds the [B, chunk, R, H, P, 3] point differences
C_OUT = HEADS * (C_HEAD + 4 * N_PV + C_Z)


def to_global(rot, trans, pts):
    """x -> R_i x + t_i for points [B, R, H, P, 3] in the frames of residues [B, R]."""
    return torch.einsum("brde,brhpe->brhpd", rot, pts) + trans[:, :, None, None, :]


class Model(nn.Module):
    def __init__(self, w_q, w_k, w_v, w_qp, w_kp, w_vp, w_b, head_weights, w_out, b_out):
        super().__init__()
        self.w_q, self.w_k, self.w_v, self.w_qp, self.w_kp, self.w_vp = w_q, w_k, w_v, w_qp, w_kp, w_vp
        self.w_b, self.head_weights, self.w_out, self.b_out = w_b, head_weights, w_out, b_out

    def forward(self, s, z, rot, trans, mask):
        batch, n_res, _ = s.shape
        q = F.linear(s, self.w_q).view(batch, n_res, HEADS, C_HEAD)
        k = F.linear(s, self.w_k).view(batch, n_res, HEADS, C_HEAD)
        v = F.linear(s, self.w_v).view(batch, n_res, HEADS, C_HEAD)
        qp = to_global(rot, trans, F.linear(s, self.w_qp).view(batch, n_res, HEADS, N_QP, 3))
        kp = to_global(rot, trans, F.linear(s, self.w_kp).view(batch, n_res, HEADS, N_QP, 3))
        vp = to_global(rot, trans, F.linear(s, self.w_vp).view(batch, n_res, HEADS, N_PV, 3))
        bias = F.linear(z, self.w_b)                                           # [B, I, J, H]
        w_l, w_c = math.sqrt(1.0 / 3.0), math.sqrt(2.0 / (9.0 * N_QP))
        gamma = F.softplus(self.head_weights)
        outs = []
        for i0 in range(0, n_res, ROW_CHUNK):
            sl = slice(i0, i0 + ROW_CHUNK)
            dist2 = ((qp[:, sl, None] - kp[:, None]) ** 2).sum((-1, -2))        # [B, I, J, H]
            logits = w_l * (torch.einsum("bihc,bjhc->bijh", q[:, sl], k) / math.sqrt(C_HEAD) + bias[:, sl]
                            - gamma * w_c / 2 * dist2) + 1e9 * (mask[:, None, :, None] - 1)
            a = logits.softmax(2)                                               # over keys j
            o = torch.einsum("bijh,bjhc->bihc", a, v)
            o_pt = torch.einsum("bijh,bjhpd->bihpd", a, vp) - trans[:, sl, None, None, :]
            o_pt = torch.einsum("bied,bihpe->bihpd", rot[:, sl], o_pt)           # R_i^T (x - t_i)
            o_pt_norm = torch.sqrt(1e-8 + (o_pt ** 2).sum(-1))
            o_pair = torch.einsum("bijh,bijc->bihc", a, z[:, sl])
            feats = [o.flatten(2), *(o_pt[..., d].flatten(2) for d in range(3)), o_pt_norm.flatten(2), o_pair.flatten(2)]
            outs.append(F.linear(torch.cat(feats, -1), self.w_out, self.b_out))
        return torch.cat(outs, 1)


def _uniform(gen, shape, fan_in):
    return (torch.rand(shape, generator=gen) * 2 - 1) * fan_in ** -0.5


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(22)
    hc = HEADS * C_HEAD
    return dict(w_q=_uniform(gen, (hc, C_S), C_S), w_k=_uniform(gen, (hc, C_S), C_S), w_v=_uniform(gen, (hc, C_S), C_S),
                w_qp=_uniform(gen, (HEADS * N_QP * 3, C_S), C_S), w_kp=_uniform(gen, (HEADS * N_QP * 3, C_S), C_S),
                w_vp=_uniform(gen, (HEADS * N_PV * 3, C_S), C_S), w_b=_uniform(gen, (HEADS, C_Z), C_Z),
                head_weights=0.5 * torch.randn(HEADS, generator=gen),
                w_out=_uniform(gen, (C_S, C_OUT), C_OUT), b_out=_uniform(gen, (C_S,), C_OUT))


def _random_rotations(n, generator):
    q, r = torch.linalg.qr(torch.randn(n, 3, 3, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    q[torch.linalg.det(q) < 0, :, 0] *= -1
    return q


def get_inputs(shape, generator, device):
    batch, n_res = shape["batch"], shape["n_res"]
    s = torch.randn(batch, n_res, C_S, generator=generator)
    z = torch.randn(batch, n_res, n_res, C_Z, generator=generator)
    rot = _random_rotations(batch * n_res, generator).view(batch, n_res, 3, 3).float()
    steps = torch.randn(batch, n_res, 3, generator=generator)
    trans = torch.cumsum(0.38 * steps / steps.norm(dim=-1, keepdim=True), 1)  # C-alpha random walk
    trans = trans - trans.mean(1, keepdim=True)
    n_valid = n_res - (torch.rand(batch, generator=generator) * 0.2 * n_res).long()
    mask = (torch.arange(n_res)[None, :] < n_valid[:, None]).float()
    return tuple(t.to(device) for t in (s, z, rot, trans, mask))
