"""graph/l2/distributed_spmm_allgather: Y_r = A_r @ all_gather(X) on rank r of W."""
import torch
import torch.distributed as dist
import torch.nn as nn


MSG_BYTES = 512 << 20  # bound on one slice of the [edges, F] products (whole: 4 GB per rank at the default)


class Model(nn.Module):
    def forward(self, rowptr, col, val, x_local):  # this rank's row block; col holds GLOBAL column ids
        x_full = all_gather_rows(x_local)  # every rank receives the full X [N, F]
        n_rows, feat = rowptr.numel() - 1, x_full.shape[1]
        rows_per_slice = max(1, MSG_BYTES * n_rows // (max(1, col.numel()) * feat * x_full.element_size()))
        cuts = list(range(0, n_rows, rows_per_slice)) + [n_rows]
        edge_cuts = rowptr[cuts].tolist()
        out = torch.empty(n_rows, feat, dtype=x_full.dtype, device=x_full.device)
        for r0, r1, e0, e1 in zip(cuts, cuts[1:], edge_cuts, edge_cuts[1:]):
            msg = val[e0:e1, None] * x_full[col[e0:e1].long()]  # [edges of rows r0..r1, F]
            # segment_reduce sums each row in a fixed order; empty rows give 0
            out[r0:r1] = torch.segment_reduce(msg, "sum", lengths=rowptr[r0 + 1:r1 + 1] - rowptr[r0:r1], axis=0)
        return out


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


def rank_shard(shape, base, rank, world_size):
    """Rank r's rows of A (row, col sorted by (row, col), val) and of X, from a stream of its
    own: no rank (and not the judge) builds the whole graph to cut one block out."""
    n, deg, f, loc = shape["n_total"], shape["avg_degree"], shape["feat"], shape["locality"]
    lo, hi = block_bounds(n, world_size)[rank:rank + 2]
    g = torch.Generator().manual_seed(base + 15485863 * rank)
    e = (hi - lo) * deg
    row = torch.randint(0, hi - lo, (e,), generator=g)
    local_col = lo + torch.randint(0, hi - lo, (e,), generator=g)
    remote_col = torch.randint(0, n, (e,), generator=g)
    is_local = torch.rand(e, generator=g) < loc
    key = torch.unique(row * n + torch.where(is_local, local_col, remote_col))  # sorted, duplicates dropped
    row, col = lo + key // n, key % n
    val = torch.rand(col.numel(), generator=g)
    x = torch.randn(hi - lo, f, generator=g)
    return row, col, val, x


def global_problem(shape, generator, world_size):
    """The whole graph and X: every rank's shard, concatenated (for the tests)."""
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    shards = [rank_shard(shape, base, r, world_size) for r in range(world_size)]
    return tuple(torch.cat(parts) for parts in zip(*shards))


def get_inputs(shape, generator, device, rank=0, world_size=1):
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    row, col, val, x = rank_shard(shape, base, rank, world_size)
    lo, hi = block_bounds(shape["n_total"], world_size)[rank:rank + 2]
    rowptr = torch.zeros(hi - lo + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(row - lo, minlength=hi - lo), 0)
    shard = (rowptr.int(), col.int(), val, x)
    return tuple(t.to(device) for t in shard)
