"""graph/l2/triangle_count: triangles per vertex and in total, as a masked sparse product (A @ A) .* A."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, rowptr, col):
        n = rowptr.numel() - 1
        ones = torch.ones(col.numel(), dtype=torch.float32, device=col.device)  # exact below 2^24
        a = torch.sparse_csr_tensor(rowptr, col, ones, (n, n))
        w = torch.sparse.mm(a, a).to_sparse_coo()  # columns within a row come out unsorted
        keys, order = torch.sort(w.indices()[0] * n + w.indices()[1])  # row-major keys
        values = w.values()[order]
        row = torch.repeat_interleave(torch.arange(n, device=col.device), rowptr[1:] - rowptr[:-1])
        wanted = row * n + col
        pos = torch.searchsorted(keys, wanted).clamp_max(max(keys.numel() - 1, 0))
        found = keys.numel() > 0
        common = torch.where(keys[pos] == wanted, values[pos], 0.0) if found else torch.zeros_like(ones)
        lengths = rowptr[1:] - rowptr[:-1]
        per_node = (torch.segment_reduce(common.double(), "sum", lengths=lengths) / 2).round().long()
        total = per_node.sum() // 3
        return per_node, total


def get_init_inputs(shape):
    return {}


def rmat_edges(scale, n_edges, generator, probs=(0.57, 0.19, 0.19, 0.05)):
    """R-MAT (Chakrabarti et al. 2004): each edge picks one quadrant per bit of its endpoints."""
    a, b, c, _ = probs
    u = torch.zeros(n_edges, dtype=torch.long)
    v = torch.zeros(n_edges, dtype=torch.long)
    for _ in range(scale):
        r = torch.rand(n_edges, generator=generator)
        u = u * 2 + (r >= a + b).long()
        v = v * 2 + (((r >= a) & (r < a + b)) | (r >= a + b + c)).long()
    return u, v


def get_inputs(shape, generator, device):
    scale, edge_factor = shape["scale"], shape["edge_factor"]
    n = 2 ** scale
    u, v = rmat_edges(scale, edge_factor * n, generator)
    perm = torch.randperm(n, generator=generator)  # hide the R-MAT id structure
    u, v = perm[u], perm[v]
    keep = u != v
    u, v = u[keep], v[keep]
    key = torch.unique(torch.cat([u * n + v, v * n + u]))
    src, dst = key // n, key % n
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=n), 0)
    return tuple(t.to(device) for t in (rowptr, dst))
