"""graph/l3/distributed_gcn_halo: a 2-layer GCN whose vertices are split over W ranks.

logits_r = A_hat_r all_gather(relu(A_hat_r all_gather(X) W1)) W2, where A_hat = D^-1/2 (A + I) D^-1/2
(symmetric normalization, self-loops included) and rank r holds A_hat's rows of its block.
"""
import hashlib

import torch
import torch.distributed as dist
import torch.nn as nn


def all_gather_rows(x_local):
    """Concatenate every rank's block of rows; blocks may differ by one row (N % W != 0)."""
    world = dist.get_world_size()
    sizes = torch.zeros(world, dtype=torch.long, device=x_local.device)
    dist.all_gather_into_tensor(sizes, torch.tensor([x_local.shape[0]], device=x_local.device))
    width = int(sizes.max())
    padded = torch.zeros((width, *x_local.shape[1:]), dtype=x_local.dtype, device=x_local.device)
    padded[: x_local.shape[0]] = x_local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([p[:n] for p, n in zip(parts, sizes.tolist())], 0)


MSG_BYTES = 512 << 20  # bound on one slice of the [edges, width] products (whole: 4 GB per rank at the default)


def spmm(rowptr, col, val, x_full):
    """A_hat_r x_full by segment_reduce over row slices whose products stay under MSG_BYTES."""
    n_rows, width = rowptr.numel() - 1, x_full.shape[1]
    rows_per_slice = max(1, MSG_BYTES * n_rows // (max(1, col.numel()) * width * x_full.element_size()))
    cuts = list(range(0, n_rows, rows_per_slice)) + [n_rows]
    edge_cuts = rowptr[cuts].tolist()
    out = torch.empty(n_rows, width, dtype=x_full.dtype, device=x_full.device)
    for r0, r1, e0, e1 in zip(cuts, cuts[1:], edge_cuts, edge_cuts[1:]):
        msg = val[e0:e1, None] * x_full[col[e0:e1].long()]
        out[r0:r1] = torch.segment_reduce(msg, "sum", lengths=rowptr[r0 + 1:r1 + 1] - rowptr[r0:r1], axis=0)
    return out


class Model(nn.Module):
    def __init__(self, w1, w2):
        super().__init__()
        self.w1, self.w2 = nn.Parameter(w1, requires_grad=False), nn.Parameter(w2, requires_grad=False)

    def forward(self, rowptr, col, val, x_local):
        h = torch.relu(spmm(rowptr, col, val, all_gather_rows(x_local)) @ self.w1)  # layer 1
        return spmm(rowptr, col, val, all_gather_rows(h)) @ self.w2  # layer 2


def get_init_inputs(shape):
    g = torch.Generator().manual_seed(1234 + shape["feat"] * 7 + shape["hidden"] * 13 + shape["classes"])
    return {"w1": torch.randn(shape["feat"], shape["hidden"], generator=g) * shape["feat"] ** -0.5,
            "w2": torch.randn(shape["hidden"], shape["classes"], generator=g) * shape["hidden"] ** -0.5}


def block_bounds(n, world_size):
    return [r * n // world_size for r in range(world_size + 1)]


def global_graph(shape, generator, world_size):
    """Symmetric graph with self-loops as (dst, src, weight) sorted by (dst, src), weights
    1/sqrt(deg_dst deg_src); `locality` of the undirected draws stay inside one block."""
    n, deg, loc = shape["n_total"], shape["avg_degree"], shape["locality"]
    bounds = torch.tensor(block_bounds(n, world_size))
    draws = n * deg // 2
    u = torch.randint(0, n, (draws,), generator=generator)
    block = torch.bucketize(u, bounds[1:], right=True)
    lo, hi = bounds[block], bounds[block + 1]
    local_v = lo + (torch.rand(draws, generator=generator, dtype=torch.float64) * (hi - lo)).long().clamp_max(hi - lo - 1)
    v = torch.where(torch.rand(draws, generator=generator) < loc, local_v, torch.randint(0, n, (draws,), generator=generator))
    keep = u != v
    a, b = torch.minimum(u, v)[keep], torch.maximum(u, v)[keep]
    pairs = torch.unique(a * n + b)
    a, b = pairs // n, pairs % n
    loops = torch.arange(n)
    dst, src = torch.cat([a, b, loops]), torch.cat([b, a, loops])
    key = torch.sort(dst * n + src).values
    dst, src = key // n, key % n
    degree = torch.bincount(dst, minlength=n).double()
    weight = (degree[dst] * degree[src]).rsqrt().float()
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    return dst, src, weight, base


_CACHE = {}


def _cached_graph(shape, generator, world_size):
    # The judge asks for every rank's shard with identically seeded generators: build once.
    key = (hashlib.sha1(generator.get_state().numpy().tobytes()).hexdigest(), tuple(sorted(shape.items())), world_size)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = global_graph(shape, generator, world_size)
    return _CACHE[key]


def get_inputs(shape, generator, device, rank=0, world_size=1):
    dst, src, weight, base = _cached_graph(shape, generator, world_size)
    bounds = block_bounds(shape["n_total"], world_size)
    lo, hi = bounds[rank], bounds[rank + 1]
    first, last = torch.searchsorted(dst, torch.tensor([lo, hi])).tolist()
    rowptr = torch.zeros(hi - lo + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(dst[first:last] - lo, minlength=hi - lo), 0)
    x = torch.randn(hi - lo, shape["feat"], generator=torch.Generator().manual_seed(base + 15485863 * rank))
    shard = (rowptr.int(), src[first:last].int(), weight[first:last].clone(), x)
    return tuple(t.to(device) for t in shard)
