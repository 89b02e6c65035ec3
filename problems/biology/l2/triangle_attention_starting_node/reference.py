"""biology/l2/triangle_attention_starting_node: AlphaFold2 Alg. 13, triangle self-attention around the starting node."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_Z, HEADS, C_HEAD = 128, 4, 32
ROW_CHUNK = 32  # rows i per chunk: bounds the [B, chunk, H, R, R] logits


class Model(nn.Module):
    def __init__(self, ln_w, ln_b, w_q, w_k, w_v, w_b, w_g, b_g, w_o, b_o):
        super().__init__()
        self.ln_w, self.ln_b, self.w_q, self.w_k, self.w_v, self.w_b = ln_w, ln_b, w_q, w_k, w_v, w_b
        self.w_g, self.b_g, self.w_o, self.b_o = w_g, b_g, w_o, b_o

    def forward(self, z, pair_mask):
        x = F.layer_norm(z, (C_Z,), self.ln_w, self.ln_b)
        bias = F.linear(x, self.w_b).permute(0, 3, 1, 2)                          # [B, H, j, k]
        heads = lambda t: t.unflatten(-1, (HEADS, C_HEAD))
        out = []
        for i0 in range(0, z.shape[1], ROW_CHUNK):
            xc, mc = x[:, i0:i0 + ROW_CHUNK], pair_mask[:, i0:i0 + ROW_CHUNK]
            q, k, v = heads(F.linear(xc, self.w_q)), heads(F.linear(xc, self.w_k)), heads(F.linear(xc, self.w_v))
            logits = torch.einsum("bijhc,bikhc->bihjk", q, k) * C_HEAD ** -0.5
            logits = logits + bias[:, None] + 1e9 * (mc[:, :, None, None, :] - 1)
            o = torch.einsum("bihjk,bikhc->bijhc", logits.softmax(-1), v)
            gate = torch.sigmoid(heads(F.linear(xc, self.w_g, self.b_g)))
            out.append(F.linear((gate * o).flatten(-2), self.w_o, self.b_o))
        return torch.cat(out, 1)


def _uniform(gen, shape, fan_in):
    return (torch.rand(shape, generator=gen) * 2 - 1) * fan_in ** -0.5


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(1313)
    hc = HEADS * C_HEAD
    return dict(ln_w=1 + 0.1 * torch.randn(C_Z, generator=gen), ln_b=0.1 * torch.randn(C_Z, generator=gen),
                w_q=_uniform(gen, (hc, C_Z), C_Z), w_k=_uniform(gen, (hc, C_Z), C_Z), w_v=_uniform(gen, (hc, C_Z), C_Z),
                w_b=torch.randn(HEADS, C_Z, generator=gen) * C_Z ** -0.5,
                w_g=_uniform(gen, (hc, C_Z), C_Z), b_g=_uniform(gen, (hc,), C_Z),
                w_o=_uniform(gen, (C_Z, hc), C_HEAD), b_o=_uniform(gen, (C_Z,), hc))  # o is an average: small


def get_inputs(shape, generator, device):
    batch, n_res = shape["batch"], shape["n_res"]
    z = torch.randn(batch, n_res, n_res, C_Z, generator=generator)
    # padded chains: the last 0-20% residues are masked as keys; key 0 always stays, so no row is empty
    n_valid = n_res - (torch.rand(batch, generator=generator) * 0.2 * n_res).long()
    res = (torch.arange(n_res)[None, :] < n_valid[:, None]).float()
    pair_mask = res[:, :, None] * res[:, None, :]
    pair_mask[:, :, 0] = 1
    return z.to(device), pair_mask.to(device)
