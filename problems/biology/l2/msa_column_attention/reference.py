"""biology/l2/msa_column_attention: AlphaFold2 Alg. 8, MSA column-wise gated self-attention."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_M, HEADS, C_HEAD = 256, 8, 32
LOGITS_BUDGET = 2**28  # [columns, H, S, S] logits elements per chunk (1 GiB in float32)


def columns_per_chunk(n_seq: int) -> int:
    """Residue columns (over batch and residues) whose logits fit the budget; at least one."""
    return max(1, LOGITS_BUDGET // (HEADS * n_seq * n_seq))


class Model(nn.Module):
    def __init__(self, ln_w, ln_b, w_q, w_k, w_v, w_g, b_g, w_o, b_o):
        super().__init__()
        self.ln_w, self.ln_b, self.w_q, self.w_k, self.w_v = ln_w, ln_b, w_q, w_k, w_v
        self.w_g, self.b_g, self.w_o, self.b_o = w_g, b_g, w_o, b_o

    def forward(self, m, msa_mask):
        batch, n_seq, n_res, _ = m.shape
        x = F.layer_norm(m.transpose(1, 2), (C_M,), self.ln_w, self.ln_b).flatten(0, 1)  # [B*R, S, c]
        mask = msa_mask.transpose(1, 2).flatten(0, 1)                                      # [B*R, S]
        heads = lambda t: t.unflatten(-1, (HEADS, C_HEAD))
        out = []
        # the columns of every batch entry are chunked together, so peak memory is bounded by the
        # budget (or by one column's [H, S, S] logits) at every batch size
        chunk = columns_per_chunk(n_seq)
        for c0 in range(0, x.shape[0], chunk):
            xc, mc = x[c0:c0 + chunk], mask[c0:c0 + chunk]
            q, k, v = heads(F.linear(xc, self.w_q)), heads(F.linear(xc, self.w_k)), heads(F.linear(xc, self.w_v))
            logits = torch.einsum("rshc,rthc->rhst", q, k) * C_HEAD ** -0.5 + 1e9 * (mc[:, None, None, :] - 1)
            o = torch.einsum("rhst,rthc->rshc", logits.softmax(-1), v)
            gate = torch.sigmoid(heads(F.linear(xc, self.w_g, self.b_g)))
            out.append(F.linear((gate * o).flatten(-2), self.w_o, self.b_o))
        return torch.cat(out).unflatten(0, (batch, n_res)).transpose(1, 2)


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
