"""biology/l2/sharded_msa_row_attention: AlphaFold2 Alg. 7 (MSA row attention with pair bias)
under FastFold's Dynamic Axial Parallelism: MSA rows (sequences) and pair rows (residues) are
sharded over W ranks; the pair bias needs the whole pair representation, so the reference
all_gathers z along the residue-row axis."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

C_M, C_Z, HEADS, C_HEAD = 256, 128, 8, 32
SEQ_CHUNK = 64  # MSA rows per chunk at most: bounds the [B, chunk, H, R, R] logits
LOGITS_BYTES = 512 << 20  # and so does this, at large R (a 64-row chunk is 2 GB at R = 1024)


def all_gather_dim1(x_local):
    """Concatenate every rank's slice along dim 1; slices may differ by one (uneven split)."""
    world = dist.get_world_size()
    sizes = torch.zeros(world, dtype=torch.long, device=x_local.device)
    dist.all_gather_into_tensor(sizes, torch.tensor([x_local.shape[1]], device=x_local.device))
    width = int(sizes.max())
    padded = x_local.new_zeros((x_local.shape[0], width, *x_local.shape[2:]))
    padded[:, : x_local.shape[1]] = x_local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([p[:, :n] for p, n in zip(parts, sizes.tolist())], 1)


class Model(nn.Module):
    def __init__(self, ln_m_w, ln_m_b, ln_z_w, ln_z_b, w_q, w_k, w_v, w_b, w_g, b_g, w_o, b_o):
        super().__init__()
        self.ln_m_w, self.ln_m_b, self.ln_z_w, self.ln_z_b = ln_m_w, ln_m_b, ln_z_w, ln_z_b
        self.w_q, self.w_k, self.w_v, self.w_b, self.w_g, self.b_g, self.w_o, self.b_o = w_q, w_k, w_v, w_b, w_g, b_g, w_o, b_o

    def forward(self, m_local, z_local, mask_local):
        z = all_gather_dim1(z_local)  # [B, R, R, c_z] on every rank
        m_hat = F.layer_norm(m_local, (C_M,), self.ln_m_w, self.ln_m_b)
        bias = F.linear(F.layer_norm(z, (C_Z,), self.ln_z_w, self.ln_z_b), self.w_b).permute(0, 3, 1, 2)  # [B,H,R,R]
        heads = lambda t: t.unflatten(-1, (HEADS, C_HEAD))
        out = []
        n_res = m_local.shape[2]
        chunk = max(1, min(SEQ_CHUNK, LOGITS_BYTES // (4 * HEADS * n_res * n_res)))
        for s0 in range(0, m_local.shape[1], chunk):
            x, mask = m_hat[:, s0:s0 + chunk], mask_local[:, s0:s0 + chunk]
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
        w_b=torch.randn(HEADS, C_Z, generator=gen) * C_Z ** -0.5,  # pair bias about unit scale
        w_g=_uniform(gen, (hc, C_M), C_M), b_g=_uniform(gen, (hc,), C_M),
        w_o=_uniform(gen, (C_M, hc), hc), b_o=_uniform(gen, (C_M,), hc))


def bounds(n, world_size):
    return [r * n // world_size for r in range(world_size + 1)]


def get_inputs(shape, generator, device, rank=0, world_size=1):
    """Rank r's MSA rows [S_r], their mask, and its pair rows [R_r]; every rank's slices come
    from their own stream (seeded from `generator`), so no rank builds the whole MSA."""
    s, n_res = shape["n_seq"], shape["n_res"]
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    g = torch.Generator().manual_seed(base + 7777777 * rank)
    s_lo, s_hi = bounds(s, world_size)[rank:rank + 2]
    r_lo, r_hi = bounds(n_res, world_size)[rank:rank + 2]
    m = torch.randn(1, s_hi - s_lo, n_res, C_M, generator=g)
    z = torch.randn(1, r_hi - r_lo, n_res, C_Z, generator=g)
    mask = (torch.rand(1, s_hi - s_lo, n_res, generator=g) > 0.1).float()
    mask[..., 0] = 1  # every row keeps a key, so no softmax row is fully masked
    return m.to(device), z.to(device), mask.to(device)
