"""graph/l1/sddmm: sampled dense-dense matrix product, out[p] = val[p] * <X[row(p)], Y[col(p)]> over a CSR pattern."""
import torch
import torch.nn as nn

CHUNK = 2 ** 20  # edges per chunk, bounds the [chunk, F] gather temporaries


class Model(nn.Module):
    def forward(self, rowptr, col, val, X, Y):
        n = rowptr.numel() - 1
        row = torch.repeat_interleave(torch.arange(n, device=X.device), (rowptr[1:] - rowptr[:-1]).long())
        col = col.long()
        out = torch.empty_like(val)
        for start in range(0, val.numel(), CHUNK):
            sl = slice(start, start + CHUNK)
            out[sl] = val[sl] * (X[row[sl]] * Y[col[sl]]).sum(-1)
        return out


def tolerance_scale(inputs, output):
    """|val| * sum_f |X[row, f] Y[col, f]|: the dot products cancel, so errors scale with it."""
    rowptr, col, val, X, Y = inputs
    n = rowptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(n, device=X.device), (rowptr[1:] - rowptr[:-1]).long())
    col = col.long()
    scale = torch.empty(val.shape, dtype=torch.float64, device=val.device)
    for start in range(0, val.numel(), CHUNK):
        sl = slice(start, start + CHUNK)
        scale[sl] = val[sl].double().abs() * (X[row[sl]].double().abs() * Y[col[sl]].double().abs()).sum(-1)
    return scale


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
    rowptr, col = power_law_csr(n, shape["avg_degree"], 2.1, generator)
    val = torch.rand(col.numel(), generator=generator) * 2 - 1
    X = torch.randn(n, feat, generator=generator)
    Y = torch.randn(n, feat, generator=generator)
    return tuple(t.to(device) for t in (rowptr.int(), col.int(), val, X, Y))
