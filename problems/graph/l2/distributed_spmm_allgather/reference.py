"""graph/l2/distributed_spmm_allgather: Y_r = A_r @ all_gather(X) on rank r of W."""
import hashlib

import torch
import torch.distributed as dist
import torch.nn as nn


class Model(nn.Module):
    def forward(self, rowptr, col, val, x_local):  # this rank's row block; col holds GLOBAL column ids
        x_full = all_gather_rows(x_local)  # every rank receives the full X [N, F]
        msg = val[:, None] * x_full[col.long()]  # [nnz_r, F]
        # segment_reduce sums each row in a fixed order; empty rows give 0
        return torch.segment_reduce(msg, "sum", lengths=rowptr[1:] - rowptr[:-1], axis=0)


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


def get_init_inputs(shape):
    return {}


def block_bounds(n, world_size):
    """Rank r owns vertices [bounds[r], bounds[r+1])."""
    return [r * n // world_size for r in range(world_size + 1)]


def global_problem(shape, generator, world_size):
    """The whole graph (row, col sorted by (row, col), val) and X: what every rank rebuilds."""
    n, deg, f, loc = shape["n_total"], shape["avg_degree"], shape["feat"], shape["locality"]
    bounds = torch.tensor(block_bounds(n, world_size))
    e = n * deg
    row = torch.randint(0, n, (e,), generator=generator)
    block = torch.bucketize(row, bounds[1:], right=True)
    lo, hi = bounds[block], bounds[block + 1]
    local_col = lo + (torch.rand(e, generator=generator, dtype=torch.float64) * (hi - lo)).long().clamp_max(hi - lo - 1)
    remote_col = torch.randint(0, n, (e,), generator=generator)
    is_local = torch.rand(e, generator=generator) < loc
    key = torch.unique(row * n + torch.where(is_local, local_col, remote_col))
    row, col = key // n, key % n
    val = torch.rand(col.numel(), generator=generator)
    x = torch.randn(n, f, generator=generator)
    return row, col, val, x


_CACHE = {}


def _cached_global(shape, generator, world_size):
    # The judge asks for every rank's shard with identically seeded generators: build once.
    key = (hashlib.sha1(generator.get_state().numpy().tobytes()).hexdigest(), tuple(sorted(shape.items())), world_size)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = global_problem(shape, generator, world_size)
    return _CACHE[key]


def get_inputs(shape, generator, device, rank=0, world_size=1):
    row, col, val, x = _cached_global(shape, generator, world_size)
    bounds = block_bounds(shape["n_total"], world_size)
    lo, hi = bounds[rank], bounds[rank + 1]
    first, last = torch.searchsorted(row, torch.tensor([lo, hi])).tolist()
    rowptr = torch.zeros(hi - lo + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(row[first:last] - lo, minlength=hi - lo), 0)
    shard = (rowptr.int(), col[first:last].int(), val[first:last].clone(), x[lo:hi].clone())
    return tuple(t.to(device) for t in shard)
