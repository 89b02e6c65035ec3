"""graph/l1/spgemm: C = A B for square CSR matrices (Gustavson), returned as canonical CSR."""
import torch
import torch.nn as nn


def _coo(rowptr, col, val):
    n = rowptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(n, device=col.device), rowptr[1:] - rowptr[:-1])
    return torch.sparse_coo_tensor(torch.stack([row, col]), val, (n, n), check_invariants=False)


class Model(nn.Module):
    def forward(self, a_rowptr, a_col, a_val, b_rowptr, b_col, b_val):
        n = a_rowptr.numel() - 1
        c = torch.sparse.mm(_coo(a_rowptr, a_col, a_val), _coo(b_rowptr, b_col, b_val)).coalesce()
        rows, cols = c.indices()  # coalesced: sorted by (row, col), duplicates summed
        crow = torch.zeros(n + 1, dtype=torch.long, device=cols.device)
        crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)
        return crow, cols.contiguous(), c.values().contiguous()


def get_init_inputs(shape):
    return {}


def power_law_pattern(n, avg_degree, alpha, generator):
    """CSR pattern with Pareto(alpha - 1) row lengths (mean avg_degree) and uniform sorted unique columns."""
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / (alpha - 1.0))
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, n).long()
    row = torch.repeat_interleave(torch.arange(n), deg)
    col = torch.randint(0, n, (row.numel(),), generator=generator)
    key = torch.unique(row * n + col)  # sorted by (row, col), duplicates removed
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(key // n, minlength=n), 0)
    return rowptr, key % n


def get_inputs(shape, generator, device):
    n, avg_degree, alpha = shape["n"], shape["avg_degree"], shape["alpha"]
    rowptr, col = power_law_pattern(n, avg_degree, alpha, generator)
    # B has A's pattern (C is the weighted 2-hop adjacency) but its own values, so both are read
    a_val = torch.rand(col.numel(), generator=generator) + 0.5
    b_val = torch.rand(col.numel(), generator=generator) + 0.5
    tensors = (rowptr, col, a_val, rowptr.clone(), col.clone(), b_val)
    return tuple(t.to(device) for t in tensors)
