"""biology/l2/outer_product_mean: AlphaFold2 Alg. 10, MSA to pair, mean taken before the output Linear."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_M, C_OPM, C_Z = 256, 32, 128
ROW_CHUNK = 32  # rows i per chunk: bounds the [B, chunk, R, 32, 32] outer products


class Model(nn.Module):
    def __init__(self, ln_w, ln_b, w_a, b_a, w_b, b_b, w_o, b_o):
        super().__init__()
        self.ln_w, self.ln_b, self.w_a, self.b_a, self.w_b, self.b_b, self.w_o, self.b_o = ln_w, ln_b, w_a, b_a, w_b, b_b, w_o, b_o

    def forward(self, m, msa_mask):
        x = F.layer_norm(m, (C_M,), self.ln_w, self.ln_b)
        mask = msa_mask[..., None]
        a = F.linear(x, self.w_a, self.b_a) * mask                              # [B, S, R, c]
        b = F.linear(x, self.w_b, self.b_b) * mask
        norm = 1e-3 + torch.einsum("bsi,bsj->bij", msa_mask, msa_mask)            # [B, R, R]
        out = []
        for i0 in range(0, m.shape[2], ROW_CHUNK):
            outer = torch.einsum("bsic,bsjd->bijcd", a[:, :, i0:i0 + ROW_CHUNK], b)
            outer = outer / norm[:, i0:i0 + ROW_CHUNK, :, None, None]
            out.append(F.linear(outer.flatten(-2), self.w_o, self.b_o))
        return torch.cat(out, 1)


def _uniform(gen, shape, fan_in):
    return (torch.rand(shape, generator=gen) * 2 - 1) * fan_in ** -0.5


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(1010)
    return dict(ln_w=1 + 0.1 * torch.randn(C_M, generator=gen), ln_b=0.1 * torch.randn(C_M, generator=gen),
                w_a=_uniform(gen, (C_OPM, C_M), C_M), b_a=_uniform(gen, (C_OPM,), C_M),
                w_b=_uniform(gen, (C_OPM, C_M), C_M), b_b=_uniform(gen, (C_OPM,), C_M),
                # x ~ O(1) entries over 1024 features: a larger output scale keeps Delta_z O(1)
                w_o=_uniform(gen, (C_Z, C_OPM * C_OPM), C_OPM), b_o=_uniform(gen, (C_Z,), C_OPM * C_OPM))


def get_inputs(shape, generator, device):
    batch, n_seq, n_res = shape["batch"], shape["n_seq"], shape["n_res"]
    m = torch.randn(batch, n_seq, n_res, C_M, generator=generator)
    msa_mask = (torch.rand(batch, n_seq, n_res, generator=generator) > 0.1).float()
    return m.to(device), msa_mask.to(device)
