"""graph/l1/csr_spmm: Y = A X for a CSR matrix with power-law row lengths and a dense X [N, F]."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, rowptr, col, val, X):
        n = rowptr.numel() - 1
        a = torch.sparse_csr_tensor(rowptr, col, val, (n, n))
        return torch.sparse.mm(a, X)


def tolerance_scale(inputs, output):
    """|A| |X| per output element: fp32 summation error is bounded relative to it."""
    rowptr, col, val, X = inputs
    n = rowptr.numel() - 1
    a = torch.sparse_csr_tensor(rowptr, col, val.double().abs(), (n, n))
    return torch.sparse.mm(a, X.double().abs())


def get_init_inputs(shape):
    return {}


def power_law_csr(n, avg_degree, alpha, generator):
    """Chung-Lu style: Pareto(alpha - 1) row lengths scaled to the mean, uniform columns, sorted, unique."""
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / (alpha - 1.0))
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, n).long()
    row = torch.repeat_interleave(torch.arange(n), deg)
    col = torch.randint(0, n, (row.numel(),), generator=generator)
    key = torch.unique(row * n + col)
    row, col = key // n, key % n
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=n), 0)
    return rowptr, col


def get_inputs(shape, generator, device):
    n, feat = shape["n_rows"], shape["feat"]
    rowptr, col = power_law_csr(n, shape["avg_degree"], shape["alpha"], generator)
    val = torch.rand(col.numel(), generator=generator) * 2 - 1
    X = torch.randn(n, feat, generator=generator)
    return tuple(t.to(device) for t in (rowptr.int(), col.int(), val, X))
