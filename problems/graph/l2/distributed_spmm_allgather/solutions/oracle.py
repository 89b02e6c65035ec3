"""Halo exchange instead of a full all_gather: each rank fetches only the remote rows of X
its columns reference (ids bucketed by owner, all_to_all_single of counts, ids and rows),
then runs one CSR SpMM over [x_local; halo] with remapped column ids."""
import torch
import torch.distributed as dist
import torch.nn as nn


def _owner_bounds(n_local, device):
    world = dist.get_world_size()
    sizes = torch.zeros(world, dtype=torch.long, device=device)
    dist.all_gather_into_tensor(sizes, torch.tensor([n_local], dtype=torch.long, device=device))
    return torch.cat([torch.zeros(1, dtype=torch.long, device=device), sizes.cumsum(0)])


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x_local):
        rank, world = dist.get_rank(), dist.get_world_size()
        dev = x_local.device
        bounds = _owner_bounds(x_local.shape[0], dev)
        lo, hi = int(bounds[rank]), int(bounds[rank + 1])
        col = col.long()
        remote = (col < lo) | (col >= hi)
        halo_ids, inverse = torch.unique(col[remote], return_inverse=True)  # sorted, so grouped by owner
        owner = torch.bucketize(halo_ids, bounds[1:], right=True)
        send_counts = torch.bincount(owner, minlength=world)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        send_split, recv_split = send_counts.tolist(), recv_counts.tolist()
        wanted = torch.empty(sum(recv_split), dtype=torch.long, device=dev)
        dist.all_to_all_single(wanted, halo_ids, recv_split, send_split)  # ids peers want from me
        rows_out = x_local[wanted - lo].contiguous()
        halo = torch.empty(halo_ids.numel(), x_local.shape[1], dtype=x_local.dtype, device=dev)
        dist.all_to_all_single(halo, rows_out, send_split, recv_split)
        local_col = torch.where(remote, torch.zeros_like(col), col - lo)
        local_col[remote] = x_local.shape[0] + inverse
        x_ext = torch.cat([x_local, halo], 0)
        # CSR SpMM (cuSPARSE on the GPU): no [edges, F] products in memory and no atomics; the
        # earlier gather + index_add_ over slices made this oracle 0.67x of the reference on the
        # H200 (2026-11-30), where at world size 2 the halo is about all of the peer's rows anyway.
        a = torch.sparse_csr_tensor(rowptr.long(), local_col, val, (x_local.shape[0], x_ext.shape[0]))
        return a @ x_ext
