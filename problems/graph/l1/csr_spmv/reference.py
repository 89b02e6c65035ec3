"""graph/l1/csr_spmv: y = A x for a CSR matrix with power-law row lengths."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, rowptr, col, val, x):
        lengths = rowptr[1:] - rowptr[:-1]
        prod = val * x[col.long()]
        # segment_reduce sums each row in a fixed order (deterministic); empty rows give 0
        return torch.segment_reduce(prod, "sum", lengths=lengths)


def tolerance_scale(inputs, output):
    """Per-row sum of |val * x[col]|: fp32 summation error is bounded relative to it."""
    rowptr, col, val, x = inputs
    terms = (val.double() * x.double()[col.long()]).abs()
    return torch.segment_reduce(terms, "sum", lengths=rowptr[1:] - rowptr[:-1])


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, avg_degree, alpha = shape["n_rows"], shape["avg_degree"], shape["alpha"]
    # Chung-Lu style power-law degrees: Pareto(alpha - 1) scaled to the requested mean
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / (alpha - 1.0))
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, n).long()
    row = torch.repeat_interleave(torch.arange(n), deg)
    col = torch.randint(0, n, (row.numel(),), generator=generator)
    key = torch.unique(row * n + col)  # sorted by (row, col), duplicates removed
    row, col = key // n, key % n
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=n), 0)
    val = torch.rand(col.numel(), generator=generator) * 2 - 1
    x = torch.randn(n, generator=generator)
    return tuple(t.to(device) for t in (rowptr.int(), col.int(), val, x))
