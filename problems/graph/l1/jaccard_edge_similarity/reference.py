"""graph/l1/jaccard_edge_similarity: Jaccard coefficient |N(u) & N(v)| / |N(u) | N(v)| of every stored edge."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, rowptr, col):
        n = rowptr.numel() - 1
        ones = torch.ones(col.numel(), dtype=torch.float32, device=col.device)  # counts exact below 2^24
        a = torch.sparse_csr_tensor(rowptr, col, ones, (n, n))
        c = torch.sparse.mm(a, a).to_sparse_coo()  # common-neighbour counts
        keys, order = torch.sort(c.indices()[0] * n + c.indices()[1])
        values = c.values()[order]
        deg = rowptr[1:] - rowptr[:-1]
        row = torch.repeat_interleave(torch.arange(n, device=col.device), deg)
        wanted = row * n + col
        if keys.numel():
            pos = torch.searchsorted(keys, wanted).clamp_max(keys.numel() - 1)
            inter = torch.where(keys[pos] == wanted, values[pos], 0.0).round().int()
        else:
            inter = torch.zeros_like(col, dtype=torch.int32)
        union = (deg[row] + deg[col] - inter).float()
        return inter, inter.float() / union


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, avg_degree, alpha = shape["n"], shape["avg_degree"], shape["alpha"]
    # power-law endpoint weights (Pareto(alpha - 1)) on one side, uniform on the other, then symmetrized
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / (alpha - 1.0))
    deg = (raw / raw.mean() * avg_degree / 2).round().clamp_(0, 1000).long()
    src = torch.repeat_interleave(torch.arange(n), deg)
    dst = torch.randint(0, n, (src.numel(),), generator=generator)
    # close some triangles: a quarter of the edges go to a neighbour of a neighbour-ish id nearby
    near = torch.rand(src.numel(), generator=generator) < 0.25
    dst = torch.where(near, (src + torch.randint(1, 9, (src.numel(),), generator=generator)) % n, dst)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    key = torch.unique(torch.cat([src * n + dst, dst * n + src]))
    src, dst = key // n, key % n
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=n), 0)
    return tuple(t.to(device) for t in (rowptr, dst))
