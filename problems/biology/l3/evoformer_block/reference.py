"""biology/l3/evoformer_block: one AlphaFold2 Evoformer block (Jumper et al. 2021, Suppl. Alg. 6), eval mode.

Weights arrive as a flat dict of tensors (names `<module>_<layer>`); forward is written with
torch.nn.functional so float64 calibration runs the same code.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_M, C_Z = 256, 128          # MSA and pair channels
MSA_HEADS, PAIR_HEADS, C_HEAD = 8, 4, 32
C_OPM, C_TRI, TRANSITION_N = 32, 128, 4


def _ln(p, name, x):
    return F.layer_norm(x, x.shape[-1:], p[name + "_ln_w"], p[name + "_ln_b"])


def gated_attention(p, name, x, mask, heads, bias_source=None):
    """Alg. 7 / 8 / 13: attend over dim -2 of x [B,I,J,c]; mask [B,I,J] masks keys.

    bias_source: None (Alg. 8), "self" (bias from the LayerNormed x itself, Alg. 13/14), or a
    pair tensor z (Alg. 7: bias from LN(z)); the bias [J,K] is shared over I.
    """
    x = _ln(p, name, x)
    q, k, v = F.linear(x, p[name + "_qkv_w"]).unflatten(-1, (3, heads, C_HEAD)).unbind(-3)  # [B,I,J,H,c]
    logits = torch.einsum("bijhc,bikhc->bihjk", q, k) * C_HEAD ** -0.5 + 1e9 * (mask[:, :, None, None, :] - 1)
    if bias_source is not None:
        src = x if isinstance(bias_source, str) else _ln(p, name + "_bias", bias_source)
        logits = logits + F.linear(src, p[name + "_bias_w"]).permute(0, 3, 1, 2)[:, None]
    o = torch.einsum("bihjk,bikhc->bijhc", logits.softmax(-1), v)
    gate = torch.sigmoid(F.linear(x, p[name + "_gate_w"], p[name + "_gate_b"])).unflatten(-1, (heads, C_HEAD))
    return F.linear((gate * o).flatten(-2), p[name + "_out_w"], p[name + "_out_b"])


def transition(p, name, x):
    """Alg. 9 / 15: LN, Linear(c -> 4c), ReLU, Linear(4c -> c)."""
    h = torch.relu(F.linear(_ln(p, name, x), p[name + "_w1"], p[name + "_b1"]))
    return F.linear(h, p[name + "_w2"], p[name + "_b2"])


def outer_product_mean(p, m, msa_mask):
    """Alg. 10 with the mean taken before the output Linear (paper order)."""
    a, b = (F.linear(_ln(p, "opm", m), p["opm_ab_w"], p["opm_ab_b"]) * msa_mask[..., None]).chunk(2, -1)
    norm = 1e-3 + torch.einsum("bsi,bsj->bij", msa_mask, msa_mask)[..., None, None]
    outer = torch.einsum("bsic,bsjd->bijcd", a, b) / norm
    return F.linear(outer.flatten(-2), p["opm_out_w"], p["opm_out_b"])


def triangle_multiply(p, name, z, mask, outgoing):
    """Alg. 11 (outgoing: sum_k a_ik b_jk) / Alg. 12 (incoming: sum_k a_ki b_kj)."""
    z = _ln(p, name, z)
    a_gate, a_proj, b_gate, b_proj = F.linear(z, p[name + "_ab_w"], p[name + "_ab_b"]).chunk(4, -1)
    m = mask[..., None]
    a, b = m * torch.sigmoid(a_gate) * a_proj, m * torch.sigmoid(b_gate) * b_proj
    x = torch.einsum("bikc,bjkc->bijc" if outgoing else "bkic,bkjc->bijc", a, b)
    x = F.layer_norm(x, x.shape[-1:], p[name + "_lnx_w"], p[name + "_lnx_b"])
    return torch.sigmoid(F.linear(z, p[name + "_g_w"], p[name + "_g_b"])) * F.linear(x, p[name + "_o_w"], p[name + "_o_b"])


class Model(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        for name, w in weights.items():
            self.register_buffer(name, w)

    def forward(self, m, z, msa_mask, pair_mask):
        p = dict(self.named_buffers())
        m = m + gated_attention(p, "row", m, msa_mask, MSA_HEADS, bias_source=z)
        m = m + gated_attention(p, "col", m.transpose(1, 2), msa_mask.transpose(1, 2), MSA_HEADS).transpose(1, 2)
        m = m + transition(p, "msa_tr", m)
        z = z + outer_product_mean(p, m, msa_mask)
        z = z + triangle_multiply(p, "tri_out", z, pair_mask, outgoing=True)
        z = z + triangle_multiply(p, "tri_in", z, pair_mask, outgoing=False)
        z = z + gated_attention(p, "tri_start", z, pair_mask, PAIR_HEADS, bias_source="self")
        # ending node (Alg. 14) = the starting-node module applied to z^T
        z = z + gated_attention(p, "tri_end", z.transpose(1, 2), pair_mask.transpose(1, 2), PAIR_HEADS,
                                bias_source="self").transpose(1, 2)
        z = z + transition(p, "pair_tr", z)
        return m, z


def weight_shapes() -> dict[str, tuple[int, ...]]:
    """Every weight of the block, in a fixed order (Linear weights are [out, in])."""
    shapes: dict[str, tuple[int, ...]] = {}

    def ln(name, c):
        shapes[name + "_ln_w"], shapes[name + "_ln_b"] = (c,), (c,)

    def attention(name, c_in, heads, c_bias=None, self_bias=False):
        ln(name, c_in)
        shapes[name + "_qkv_w"] = (3 * heads * C_HEAD, c_in)
        shapes[name + "_gate_w"], shapes[name + "_gate_b"] = (heads * C_HEAD, c_in), (heads * C_HEAD,)
        shapes[name + "_out_w"], shapes[name + "_out_b"] = (c_in, heads * C_HEAD), (c_in,)
        if c_bias:
            ln(name + "_bias", c_bias)
            shapes[name + "_bias_w"] = (heads, c_bias)
        if self_bias:
            shapes[name + "_bias_w"] = (heads, c_in)

    def trans(name, c):
        ln(name, c)
        shapes[name + "_w1"], shapes[name + "_b1"] = (TRANSITION_N * c, c), (TRANSITION_N * c,)
        shapes[name + "_w2"], shapes[name + "_b2"] = (c, TRANSITION_N * c), (c,)

    def trimul(name):
        ln(name, C_Z)
        shapes[name + "_ab_w"], shapes[name + "_ab_b"] = (4 * C_TRI, C_Z), (4 * C_TRI,)
        shapes[name + "_g_w"], shapes[name + "_g_b"] = (C_Z, C_Z), (C_Z,)
        shapes[name + "_lnx_w"], shapes[name + "_lnx_b"] = (C_TRI,), (C_TRI,)
        shapes[name + "_o_w"], shapes[name + "_o_b"] = (C_Z, C_TRI), (C_Z,)

    attention("row", C_M, MSA_HEADS, c_bias=C_Z)
    attention("col", C_M, MSA_HEADS)
    trans("msa_tr", C_M)
    ln("opm", C_M)
    shapes["opm_ab_w"], shapes["opm_ab_b"] = (2 * C_OPM, C_M), (2 * C_OPM,)
    shapes["opm_out_w"], shapes["opm_out_b"] = (C_Z, C_OPM * C_OPM), (C_Z,)
    trimul("tri_out")
    trimul("tri_in")
    attention("tri_start", C_Z, PAIR_HEADS, self_bias=True)
    attention("tri_end", C_Z, PAIR_HEADS, self_bias=True)
    trans("pair_tr", C_Z)
    return shapes


def _weight_of_bias(name: str) -> str:
    head, _, tail = name.rpartition("_")
    return head + "_" + tail.replace("b", "w")  # x_b -> x_w, x_b1 -> x_w1


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(2021)
    shapes = weight_shapes()
    weights = {}
    for name, dims in shapes.items():
        if name.endswith("_ln_w") or name.endswith("_lnx_w"):
            weights[name] = 1 + 0.1 * torch.randn(dims, generator=gen)
        elif name.endswith("_ln_b") or name.endswith("_lnx_b"):
            weights[name] = 0.1 * torch.randn(dims, generator=gen)
        else:  # nn.Linear's default range U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases use the same fan-in
            fan_in = shapes[_weight_of_bias(name)][-1] if len(dims) == 1 else dims[-1]
            weights[name] = (torch.rand(dims, generator=gen) * 2 - 1) * fan_in ** -0.5
    return weights


def get_inputs(shape, generator, device):
    batch, n_seq, n_res = shape["batch"], shape["n_seq"], shape["n_res"]
    msa_mask = (torch.rand(batch, n_seq, n_res, generator=generator) > 0.1).float()
    msa_mask[:, 0] = 1  # the query sequence is never masked, so no attention row is fully masked
    m = torch.randn(batch, n_seq, n_res, C_M, generator=generator)
    z = torch.randn(batch, n_res, n_res, C_Z, generator=generator)
    pair_mask = torch.ones(batch, n_res, n_res)
    return tuple(t.to(device) for t in (m, z, msa_mask, pair_mask))
