"""biology/l2/msa_column_attention: AlphaFold2 Alg. 8, MSA column-wise gated self-attention."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_M, HEADS, C_HEAD = 256, 8, 32
COL_CHUNK = 32  # residue columns per chunk: bounds the [B, chunk, H, S, S] logits


class Model(nn.Module):
    def __init__(self, ln_w, ln_b, w_q, w_k, w_v, w_g, b_g, w_o, b_o):
        super().__init__()
        self.ln_w, self.ln_b, self.w_q, self.w_k, self.w_v = ln_w, ln_b, w_q, w_k, w_v
        self.w_g, self.b_g, self.w_o, self.b_o = w_g, b_g, w_o, b_o

    def forward(self, m, msa_mask):
        x = F.layer_norm(m.transpose(1, 2), (C_M,), self.ln_w, self.ln_b)      # [B, R, S, c]
        mask = msa_mask.transpose(1, 2)                                          # [B, R, S]
        heads = lambda t: t.unflatten(-1, (HEADS, C_HEAD))
        out = []
        for r0 in range(0, x.shape[1], COL_CHUNK):
            xc, mc = x[:, r0:r0 + COL_CHUNK], mask[:, r0:r0 + COL_CHUNK]
            q, k, v = heads(F.linear(xc, self.w_q)), heads(F.linear(xc, self.w_k)), heads(F.linear(xc, self.w_v))
            logits = torch.einsum("brshc,brthc->brhst", q, k) * C_HEAD ** -0.5 + 1e9 * (mc[:, :, None, None, :] - 1)
            o = torch.einsum("brhst,brthc->brshc", logits.softmax(-1), v)
            gate = torch.sigmoid(heads(F.linear(xc, self.w_g, self.b_g)))
            out.append(F.linear((gate * o).flatten(-2), self.w_o, self.b_o))
        return torch.cat(out, 1).transpose(1, 2)


def _uniform(gen, shape, fan_in):
    return (torch.rand(shape, generator=gen) * 2 - 1) * fan_in ** -0.5


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(808)
    hc = HEADS * C_HEAD
    return dict(ln_w=1 + 0.1 * torch.randn(C_M, generator=gen), ln_b=0.1 * torch.randn(C_M, generator=gen),
                w_q=_uniform(gen, (hc, C_M), C_M), w_k=_uniform(gen, (hc, C_M), C_M), w_v=_uniform(gen, (hc, C_M), C_M),
                w_g=_uniform(gen, (hc, C_M), C_M), b_g=_uniform(gen, (hc,), C_M),
                w_o=_uniform(gen, (C_M, hc), C_HEAD), b_o=_uniform(gen, (C_M,), hc))  # o is an average over S: small


def get_inputs(shape, generator, device):
    batch, n_seq, n_res = shape["batch"], shape["n_seq"], shape["n_res"]
    m = torch.randn(batch, n_seq, n_res, C_M, generator=generator)
    msa_mask = (torch.rand(batch, n_seq, n_res, generator=generator) > 0.1).float()
    msa_mask[:, 0] = 1  # the query sequence is never masked: no column is fully masked
    return m.to(device), msa_mask.to(device)
