"""biology/l2/msa_row_attention_pair_bias: AlphaFold2 Alg. 7, MSA row-wise gated self-attention with pair bias."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_M, C_Z, HEADS, C_HEAD = 256, 128, 8, 32
SEQ_CHUNK = 64  # rows of the MSA per chunk: bounds the [B, chunk, H, R, R] logits


class Model(nn.Module):
    def __init__(self, ln_m_w, ln_m_b, ln_z_w, ln_z_b, w_q, w_k, w_v, w_b, w_g, b_g, w_o, b_o):
        super().__init__()
        self.ln_m_w, self.ln_m_b, self.ln_z_w, self.ln_z_b = ln_m_w, ln_m_b, ln_z_w, ln_z_b
        self.w_q, self.w_k, self.w_v, self.w_b, self.w_g, self.b_g, self.w_o, self.b_o = w_q, w_k, w_v, w_b, w_g, b_g, w_o, b_o

    def forward(self, m, z, msa_mask):
        m_hat = F.layer_norm(m, (C_M,), self.ln_m_w, self.ln_m_b)
        bias = F.linear(F.layer_norm(z, (C_Z,), self.ln_z_w, self.ln_z_b), self.w_b).permute(0, 3, 1, 2)  # [B,H,R,R]
        heads = lambda t: t.unflatten(-1, (HEADS, C_HEAD))
        out = []
        for s0 in range(0, m.shape[1], SEQ_CHUNK):
            x, mask = m_hat[:, s0:s0 + SEQ_CHUNK], msa_mask[:, s0:s0 + SEQ_CHUNK]
            q, k, v = heads(F.linear(x, self.w_q)), heads(F.linear(x, self.w_k)), heads(F.linear(x, self.w_v))
            logits = torch.einsum("bsjhc,bskhc->bshjk", q, k) * C_HEAD ** -0.5
            logits = logits + bias[:, None] + 1e9 * (mask[:, :, None, None, :] - 1)
            o = torch.einsum("bshjk,bskhc->bsjhc", logits.softmax(-1), v)
            gate = torch.sigmoid(heads(F.linear(x, self.w_g, self.b_g)))
            out.append(F.linear((gate * o).flatten(-2), self.w_o, self.b_o))
        return torch.cat(out, 1)


def _uniform(gen, shape, fan_in):
    return (torch.rand(shape, generator=gen) * 2 - 1) * fan_in ** -0.5


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(707)
    hc = HEADS * C_HEAD
    return dict(
        ln_m_w=1 + 0.1 * torch.randn(C_M, generator=gen), ln_m_b=0.1 * torch.randn(C_M, generator=gen),
        ln_z_w=1 + 0.1 * torch.randn(C_Z, generator=gen), ln_z_b=0.1 * torch.randn(C_Z, generator=gen),
        w_q=_uniform(gen, (hc, C_M), C_M), w_k=_uniform(gen, (hc, C_M), C_M), w_v=_uniform(gen, (hc, C_M), C_M),
        # pair bias about unit scale (trained AF2 biases are O(1)), so it shapes the attention
        w_b=torch.randn(HEADS, C_Z, generator=gen) * C_Z ** -0.5,
        w_g=_uniform(gen, (hc, C_M), C_M), b_g=_uniform(gen, (hc,), C_M),
        w_o=_uniform(gen, (C_M, hc), hc), b_o=_uniform(gen, (C_M,), hc))


def get_inputs(shape, generator, device):
    batch, n_seq, n_res = shape["batch"], shape["n_seq"], shape["n_res"]
    m = torch.randn(batch, n_seq, n_res, C_M, generator=generator)
    z = torch.randn(batch, n_res, n_res, C_Z, generator=generator)
    msa_mask = (torch.rand(batch, n_seq, n_res, generator=generator) > 0.1).float()
    msa_mask[..., 0] = 1  # every row keeps a key, so no softmax row is fully masked
    return m.to(device), z.to(device), msa_mask.to(device)
