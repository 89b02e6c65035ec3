"""biology/l2/triangle_multiplicative_update: AlphaFold2 Alg. 11 (outgoing edges), eval mode."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C_Z = 128     # pair channels
HIDDEN = 128  # c of Alg. 11


class Model(nn.Module):
    def __init__(self, ln_w, ln_b, w_ab, b_ab, w_g, b_g, ln_out_w, ln_out_b, w_o, b_o, outgoing=True):
        super().__init__()
        # w_ab stacks [a_gate; a_proj; b_gate; b_proj], each [HIDDEN, C_Z]
        self.ln_w, self.ln_b, self.w_ab, self.b_ab = ln_w, ln_b, w_ab, b_ab
        self.w_g, self.b_g, self.ln_out_w, self.ln_out_b, self.w_o, self.b_o = w_g, b_g, ln_out_w, ln_out_b, w_o, b_o
        self.equation = "bikc,bjkc->bijc" if outgoing else "bkic,bkjc->bijc"

    def forward(self, z, pair_mask):
        z_hat = F.layer_norm(z, z.shape[-1:], self.ln_w, self.ln_b)
        a_gate, a_proj, b_gate, b_proj = F.linear(z_hat, self.w_ab, self.b_ab).chunk(4, -1)
        m = pair_mask[..., None]
        a = m * torch.sigmoid(a_gate) * a_proj
        b = m * torch.sigmoid(b_gate) * b_proj
        x = torch.einsum(self.equation, a, b)
        g = torch.sigmoid(F.linear(z_hat, self.w_g, self.b_g))
        return g * F.linear(F.layer_norm(x, x.shape[-1:], self.ln_out_w, self.ln_out_b), self.w_o, self.b_o)


def _linear(gen, n_out, n_in):
    bound = n_in ** -0.5  # nn.Linear's default range
    return (torch.rand(n_out, n_in, generator=gen) * 2 - 1) * bound, (torch.rand(n_out, generator=gen) * 2 - 1) * bound


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(1011)
    w_ab, b_ab = _linear(gen, 4 * HIDDEN, C_Z)
    w_g, b_g = _linear(gen, C_Z, C_Z)
    w_o, b_o = _linear(gen, C_Z, HIDDEN)
    # LayerNorm affine parameters near (1, 0) but not exactly, so every weight matters
    ln = [1 + 0.1 * torch.randn(C_Z, generator=gen), 0.1 * torch.randn(C_Z, generator=gen)]
    ln_out = [1 + 0.1 * torch.randn(HIDDEN, generator=gen), 0.1 * torch.randn(HIDDEN, generator=gen)]
    return dict(ln_w=ln[0], ln_b=ln[1], w_ab=w_ab, b_ab=b_ab, w_g=w_g, b_g=b_g,
                ln_out_w=ln_out[0], ln_out_b=ln_out[1], w_o=w_o, b_o=b_o, outgoing=True)


def residue_pair_mask(batch, n_res, generator):
    """Pair mask of padded chains: the last 0-20% residues of each chain are padding."""
    n_valid = n_res - (torch.rand(batch, generator=generator) * 0.2 * n_res).long()
    res = (torch.arange(n_res)[None, :] < n_valid[:, None]).float()
    return res[:, :, None] * res[:, None, :]


def get_inputs(shape, generator, device):
    batch, n_res = shape["batch"], shape["n_res"]
    z = torch.randn(batch, n_res, n_res, C_Z, generator=generator)
    mask = residue_pair_mask(batch, n_res, generator)
    return z.to(device), mask.to(device)
