"""biology/l3/structure_module: AlphaFold2 structure module, backbone part (Alg. 20 without torsions), eval mode.

Eight iterations with shared weights of: IPA (as biology/l2/invariant_point_attention), LayerNorm,
a 3-layer transition, and the backbone update (Alg. 23) composing each residue frame.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

C_S, C_Z, HEADS, C_HEAD, N_QP, N_PV = 384, 128, 12, 16, 4, 8
N_ITER = 8
C_IPA_OUT = HEADS * (C_HEAD + 4 * N_PV + C_Z)


def to_global(rot, trans, pts):
    return torch.einsum("brde,brhpe->brhpd", rot, pts) + trans[:, :, None, None, :]


def ipa(p, s, z, rot, trans, mask):
    """Invariant point attention (Alg. 22), identical to biology/l2/invariant_point_attention."""
    batch, n_res, _ = s.shape
    q = F.linear(s, p["ipa_w_q"]).view(batch, n_res, HEADS, C_HEAD)
    k = F.linear(s, p["ipa_w_k"]).view(batch, n_res, HEADS, C_HEAD)
    v = F.linear(s, p["ipa_w_v"]).view(batch, n_res, HEADS, C_HEAD)
    qp = to_global(rot, trans, F.linear(s, p["ipa_w_qp"]).view(batch, n_res, HEADS, N_QP, 3))
    kp = to_global(rot, trans, F.linear(s, p["ipa_w_kp"]).view(batch, n_res, HEADS, N_QP, 3))
    vp = to_global(rot, trans, F.linear(s, p["ipa_w_vp"]).view(batch, n_res, HEADS, N_PV, 3))
    bias = F.linear(z, p["ipa_w_b"])
    w_l, w_c = math.sqrt(1.0 / 3.0), math.sqrt(2.0 / (9.0 * N_QP))
    gamma = F.softplus(p["ipa_head_weights"])
    dist2 = ((qp[:, :, None] - kp[:, None]) ** 2).sum((-1, -2))
    logits = w_l * (torch.einsum("bihc,bjhc->bijh", q, k) / math.sqrt(C_HEAD) + bias
                    - gamma * w_c / 2 * dist2) + 1e9 * (mask[:, None, :, None] - 1)
    a = logits.softmax(2)
    o = torch.einsum("bijh,bjhc->bihc", a, v)
    o_pt = torch.einsum("bijh,bjhpd->bihpd", a, vp) - trans[:, :, None, None, :]
    o_pt = torch.einsum("bied,bihpe->bihpd", rot, o_pt)
    o_pt_norm = torch.sqrt(1e-8 + (o_pt ** 2).sum(-1))
    o_pair = torch.einsum("bijh,bijc->bihc", a, z)
    feats = [o.flatten(2), *(o_pt[..., d].flatten(2) for d in range(3)), o_pt_norm.flatten(2), o_pair.flatten(2)]
    return F.linear(torch.cat(feats, -1), p["ipa_w_out"], p["ipa_b_out"])


def quaternion_to_rotation(b, c, d):
    """Rotation of the normalised quaternion (1, b, c, d)."""
    a = torch.ones_like(b)
    norm = torch.sqrt(a * a + b * b + c * c + d * d)
    a, b, c, d = a / norm, b / norm, c / norm, d / norm
    return torch.stack([
        torch.stack([a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)], -1),
        torch.stack([2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b)], -1),
        torch.stack([2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d], -1)], -2)


class Model(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        for name, w in weights.items():
            self.register_buffer(name, w)

    def forward(self, s_init, z, mask):
        p = dict(self.named_buffers())
        ln = lambda x, name: F.layer_norm(x, x.shape[-1:], p[name + "_w"], p[name + "_b"])
        s = F.linear(ln(s_init, "ln_s_init"), p["w_in"], p["b_in"])
        z = ln(z, "ln_z")
        batch, n_res, _ = s.shape
        rot = torch.eye(3, dtype=s.dtype, device=s.device).expand(batch, n_res, 3, 3)
        trans = torch.zeros(batch, n_res, 3, dtype=s.dtype, device=s.device)
        for _ in range(N_ITER):
            s = s + ipa(p, s, z, rot, trans, mask)
            s = ln(s, "ln_ipa")
            h = F.relu(F.linear(s, p["tr_w1"], p["tr_b1"]))
            h = F.relu(F.linear(h, p["tr_w2"], p["tr_b2"]))
            s = ln(s + F.linear(h, p["tr_w3"], p["tr_b3"]), "ln_tr")
            upd = F.linear(s, p["bb_w"], p["bb_b"])                     # (b, c, d, t_x, t_y, t_z)
            r_u = quaternion_to_rotation(upd[..., 0], upd[..., 1], upd[..., 2])
            trans = torch.einsum("brde,bre->brd", rot, upd[..., 3:]) + trans
            rot = rot @ r_u
        return s, rot, trans


def weight_shapes() -> dict[str, tuple[int, ...]]:
    hc = HEADS * C_HEAD
    return {
        "ln_s_init_w": (C_S,), "ln_s_init_b": (C_S,), "w_in": (C_S, C_S), "b_in": (C_S,),
        "ln_z_w": (C_Z,), "ln_z_b": (C_Z,),
        "ipa_w_q": (hc, C_S), "ipa_w_k": (hc, C_S), "ipa_w_v": (hc, C_S),
        "ipa_w_qp": (HEADS * N_QP * 3, C_S), "ipa_w_kp": (HEADS * N_QP * 3, C_S), "ipa_w_vp": (HEADS * N_PV * 3, C_S),
        "ipa_w_b": (HEADS, C_Z), "ipa_head_weights": (HEADS,), "ipa_w_out": (C_S, C_IPA_OUT), "ipa_b_out": (C_S,),
        "ln_ipa_w": (C_S,), "ln_ipa_b": (C_S,),
        "tr_w1": (C_S, C_S), "tr_b1": (C_S,), "tr_w2": (C_S, C_S), "tr_b2": (C_S,), "tr_w3": (C_S, C_S), "tr_b3": (C_S,),
        "ln_tr_w": (C_S,), "ln_tr_b": (C_S,), "bb_w": (6, C_S), "bb_b": (6,),
    }


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(20)
    weights = {}
    fan_in = {"b_in": C_S, "ipa_b_out": C_IPA_OUT, "tr_b1": C_S, "tr_b2": C_S, "tr_b3": C_S, "bb_b": C_S}
    for name, dims in weight_shapes().items():
        if name.endswith("_w") and name.startswith("ln"):
            weights[name] = 1 + 0.1 * torch.randn(dims, generator=gen)
        elif name.endswith("_b") and name.startswith("ln"):
            weights[name] = 0.1 * torch.randn(dims, generator=gen)
        elif name == "ipa_head_weights":
            weights[name] = 0.5 * torch.randn(dims, generator=gen)
        else:
            n_in = fan_in.get(name, dims[-1])
            weights[name] = (torch.rand(dims, generator=gen) * 2 - 1) * n_in ** -0.5
    weights["bb_w"] *= 0.1  # small backbone updates per iteration (AF2 initialises this layer at zero)
    weights["bb_b"] *= 0.1
    return weights


def get_inputs(shape, generator, device):
    batch, n_res = shape["batch"], shape["n_res"]
    s_init = torch.randn(batch, n_res, C_S, generator=generator)
    z = torch.randn(batch, n_res, n_res, C_Z, generator=generator)
    n_valid = n_res - (torch.rand(batch, generator=generator) * 0.2 * n_res).long()
    mask = (torch.arange(n_res)[None, :] < n_valid[:, None]).float()
    return s_init.to(device), z.to(device), mask.to(device)
