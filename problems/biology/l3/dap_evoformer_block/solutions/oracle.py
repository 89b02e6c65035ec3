"""DAP Evoformer block that all_gathers the projected row-attention bias [B,R_r,R,8] instead of z [B,R_r,R,128]."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

C_M, C_Z = 256, 128          # MSA and pair channels
MSA_HEADS, PAIR_HEADS, C_HEAD = 8, 4, 32
C_OPM, C_TRI, TRANSITION_N = 32, 128, 4


def bounds(n, world):
    return [r * n // world for r in range(world + 1)]


def all_gather_dim(x, dim, n_total):
    """Concatenate every rank's block of `x` along `dim` (blocks from bounds(n_total, W))."""
    world = dist.get_world_size()
    b = bounds(n_total, world)
    width = max(b[r + 1] - b[r] for r in range(world))
    pad = [0, 0] * (x.dim() - 1 - dim % x.dim()) + [0, width - x.shape[dim]]
    padded = F.pad(x, pad).contiguous()
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([p.narrow(dim, 0, b[r + 1] - b[r]) for r, p in enumerate(parts)], dim)


def reshard(x, from_dim, to_dim, n_from, n_to):
    """x is sharded along from_dim (global size n_from); return it sharded along to_dim (n_to)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    bf, bt = bounds(n_from, world), bounds(n_to, world)
    chunks = [x.narrow(to_dim, bt[q], bt[q + 1] - bt[q]).contiguous() for q in range(world)]
    send = torch.cat([c.reshape(-1) for c in chunks])
    out_shapes = []
    for p in range(world):
        shape = list(x.shape)
        shape[from_dim], shape[to_dim] = bf[p + 1] - bf[p], bt[rank + 1] - bt[rank]
        out_shapes.append(shape)
    numels = [int(torch.Size(s).numel()) for s in out_shapes]
    recv = torch.empty(sum(numels), dtype=x.dtype, device=x.device)
    dist.all_to_all_single(recv, send, numels, [c.numel() for c in chunks])
    return torch.cat([r.view(s) for r, s in zip(recv.split(numels), out_shapes)], from_dim)


def _ln(p, name, x):
    return F.layer_norm(x, x.shape[-1:], p[name + "_ln_w"], p[name + "_ln_b"])


def gated_attention(p, name, x, mask, heads, bias=None):
    """Alg. 7 / 8 / 13 over dim -2 of LN(x) [B,I,J,c]; mask [B,I,J] masks keys; bias [B,H,J,K]."""
    x = _ln(p, name, x)
    q, k, v = F.linear(x, p[name + "_qkv_w"]).unflatten(-1, (3, heads, C_HEAD)).unbind(-3)
    logits = torch.einsum("bijhc,bikhc->bihjk", q, k) * C_HEAD ** -0.5 + 1e9 * (mask[:, :, None, None, :] - 1)
    if bias is not None:
        logits = logits + bias[:, None]
    o = torch.einsum("bihjk,bikhc->bijhc", logits.softmax(-1), v)
    gate = torch.sigmoid(F.linear(x, p[name + "_gate_w"], p[name + "_gate_b"])).unflatten(-1, (heads, C_HEAD))
    return F.linear((gate * o).flatten(-2), p[name + "_out_w"], p[name + "_out_b"])


def pair_bias(p, name, src_rows, ln_name, n_res):
    """Bias [B,H,R,R] from LN(source rows) of this rank, gathered over all rows."""
    local = F.linear(_ln(p, ln_name, src_rows), p[name + "_bias_w"])  # [B,R_r,R,H]
    return all_gather_dim(local, 1, n_res).permute(0, 3, 1, 2)


def transition(p, name, x):
    h = torch.relu(F.linear(_ln(p, name, x), p[name + "_w1"], p[name + "_b1"]))
    return F.linear(h, p[name + "_w2"], p[name + "_b2"])


def triangle_projections(p, name, z, mask):
    zn = _ln(p, name, z)
    a_gate, a_proj, b_gate, b_proj = F.linear(zn, p[name + "_ab_w"], p[name + "_ab_b"]).chunk(4, -1)
    m = mask[..., None]
    return zn, m * torch.sigmoid(a_gate) * a_proj, m * torch.sigmoid(b_gate) * b_proj


def triangle_output(p, name, zn_rows, x):
    x = F.layer_norm(x, x.shape[-1:], p[name + "_lnx_w"], p[name + "_lnx_b"])
    return torch.sigmoid(F.linear(zn_rows, p[name + "_g_w"], p[name + "_g_b"])) * F.linear(x, p[name + "_o_w"], p[name + "_o_b"])


class ModelNew(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        for name, w in weights.items():
            self.register_buffer(name, w)

    def forward(self, m, z, msa_mask, pair_mask):
        """m [B,S_r,R,c_m], msa_mask [B,S_r,R] (sequence shard); z [B,R_r,R,c_z], pair_mask [B,R_r,R] (row shard)."""
        p = dict(self.named_buffers())
        n_seq, n_res = self._total(msa_mask), z.shape[2]
        # MSA row attention with pair bias (S shard): the bias needs every row of z
        # project the local pair rows to the 8 bias channels first: 16x less traffic than z
        m = m + gated_attention(p, "row", m, msa_mask, MSA_HEADS, bias=pair_bias(p, "row", z, "row_bias", n_res))
        # column attention and transition on the residue shard
        m_c = reshard(m, 1, 2, n_seq, n_res)
        mask_c = reshard(msa_mask, 1, 2, n_seq, n_res)
        m_c = m_c + gated_attention(p, "col", m_c.transpose(1, 2), mask_c.transpose(1, 2), MSA_HEADS).transpose(1, 2)
        m_c = m_c + transition(p, "msa_tr", m_c)
        # outer product mean: rows i of this rank, right projection gathered over all residues
        a, b = (F.linear(_ln(p, "opm", m_c), p["opm_ab_w"], p["opm_ab_b"]) * mask_c[..., None]).chunk(2, -1)
        b_full, mask_full = all_gather_dim(b, 2, n_res), all_gather_dim(mask_c, 2, n_res)
        norm = 1e-3 + torch.einsum("bsi,bsj->bij", mask_c, mask_full)[..., None, None]
        z = z + F.linear((torch.einsum("bsic,bsjd->bijcd", a, b_full) / norm).flatten(-2), p["opm_out_w"], p["opm_out_b"])
        # triangle update, outgoing: x_ij = sum_k a_ik b_jk (rows j of b from every rank)
        zn, a, b = triangle_projections(p, "tri_out", z, pair_mask)
        z = z + triangle_output(p, "tri_out", zn, torch.einsum("bikc,bjkc->bijc", a, all_gather_dim(b, 1, n_res)))
        # triangle update, incoming: x_ij = sum_k a_ki b_kj on the column shard of z
        zn_rows = _ln(p, "tri_in", z)
        _, a_c, b_c = triangle_projections(p, "tri_in", reshard(z, 1, 2, n_res, n_res), reshard(pair_mask, 1, 2, n_res, n_res))
        z = z + triangle_output(p, "tri_in", zn_rows, torch.einsum("bkic,bkjc->bijc", a_c, all_gather_dim(b_c, 2, n_res)))
        # triangle attention, starting node (row shard), bias from LN(z) of every row
        z = z + gated_attention(p, "tri_start", z, pair_mask, PAIR_HEADS, bias=pair_bias(p, "tri_start", z, "tri_start", n_res))
        # ending node = starting-node module on z^T: rows of z^T are columns of z
        zt = reshard(z, 1, 2, n_res, n_res).transpose(1, 2)
        mt = reshard(pair_mask, 1, 2, n_res, n_res).transpose(1, 2)
        upd = gated_attention(p, "tri_end", zt, mt, PAIR_HEADS, bias=pair_bias(p, "tri_end", zt, "tri_end", n_res))
        z = z + reshard(upd.transpose(1, 2), 2, 1, n_res, n_res)
        z = z + transition(p, "pair_tr", z)
        return reshard(m_c, 2, 1, n_res, n_seq), z

    @staticmethod
    def _total(msa_mask):
        t = torch.tensor([msa_mask.shape[1]], device=msa_mask.device)
        dist.all_reduce(t)
        return int(t)


