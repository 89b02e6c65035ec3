"""graph/l2/triangle_count: triangles per vertex and in total.

Each edge is oriented from the endpoint of lower (degree, id) to the higher one, so every vertex
keeps at most sqrt(2 |E|) out-neighbours and every triangle u < v < w appears exactly once as a
wedge u -> v -> w closed by the edge u -> w. The wedges are enumerated in chunks of bounded size
and each closing edge is looked up by binary search among the sorted oriented edge keys. (The
previous A @ A with torch.sparse formed sum(deg^2) products: hub vertices broke cuSPARSE.)
"""
import torch
import torch.nn as nn

WEDGE_CHUNK = 2**24  # wedges (u, v, w) materialised at a time: bounds memory at about 1 GiB


def oriented_edges(rowptr: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """Sorted keys src * n + dst of the edges oriented from lower to higher (degree, id)."""
    n = rowptr.numel() - 1
    degree = rowptr[1:] - rowptr[:-1]
    row = torch.repeat_interleave(torch.arange(n, device=col.device), degree)
    rank = degree * n + torch.arange(n, device=col.device)  # distinct: a total order
    up = rank[row] < rank[col]
    return torch.sort(row[up] * n + col[up]).values


def wedge_chunks(work: torch.Tensor, budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges of edges whose wedge counts sum to at most `budget` (or one edge each)."""
    ends = torch.cumsum(work, 0)
    bounds, start, done = [], 0, 0
    while start < work.numel():
        stop = int(torch.searchsorted(ends, done + budget, right=True))
        stop = max(stop, start + 1)
        bounds.append((start, stop))
        start, done = stop, int(ends[stop - 1])
    return bounds


class Model(nn.Module):
    def forward(self, rowptr, col):
        n = rowptr.numel() - 1
        device = col.device
        keys = oriented_edges(rowptr, col)
        src, dst = keys // n, keys % n
        out_degree = torch.bincount(src, minlength=n)
        out_start = torch.cumsum(out_degree, 0) - out_degree
        per_node = torch.zeros(n, dtype=torch.long, device=device)
        wedges = out_degree[dst]  # edge u -> v opens a wedge u -> v -> w for every out-neighbour w of v
        for e0, e1 in wedge_chunks(wedges, WEDGE_CHUNK):
            counts = wedges[e0:e1]
            first = torch.cumsum(counts, 0) - counts
            edge = torch.repeat_interleave(torch.arange(e0, e1, device=device), counts)
            within = torch.arange(edge.numel(), device=device) - first[edge - e0]
            u, v = src[edge], dst[edge]
            w = dst[out_start[v] + within]
            closing = u * n + w
            pos = torch.searchsorted(keys, closing).clamp_max(keys.numel() - 1)
            closed = keys[pos] == closing
            per_node += torch.bincount(torch.cat([u[closed], v[closed], w[closed]]), minlength=n)
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
