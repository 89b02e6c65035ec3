"""graph/l2/pagerank_power_iteration: K PageRank power iterations with dangling-node redistribution."""
import torch
import torch.nn as nn

DAMPING = 0.85  # passed as a 0-d tensor so that its dtype sets the precision (float64 calibration)


class Model(nn.Module):
    def __init__(self, iters):
        super().__init__()
        self.iters = int(iters)

    def forward(self, rowptr, col, out_degree, damping):
        """rowptr/col: in-edge CSR (row i lists the sources j of edges j -> i); out_degree 0 = dangling;
        damping: 0-d float tensor (0.85)."""
        n = rowptr.numel() - 1
        lengths = rowptr[1:] - rowptr[:-1]
        col = col.long()
        dangling = out_degree == 0
        dtype = damping.dtype
        inv_out = torch.where(dangling, 0.0, 1.0 / out_degree.clamp_min(1).to(dtype))
        r = torch.full((n,), 1.0 / n, dtype=dtype, device=rowptr.device)
        prev = r
        for _ in range(self.iters):
            contrib = r * inv_out
            lost = r[dangling].sum()
            pulled = torch.segment_reduce(contrib[col], "sum", lengths=lengths)
            prev, r = r, (1 - damping) / n + damping * (pulled + lost / n)
        resid = (r - prev).abs().sum()
        return r, resid


def get_init_inputs(shape):
    return {"iters": shape["iters"]}


def get_inputs(shape, generator, device):
    n, avg_degree, frac = shape["n"], shape["avg_degree"], shape["dangling_frac"]
    # power-law out-degrees (web-like), a random set of dangling pages; most links stay within a
    # window of nearby ids (host locality), so the ranks converge slowly and resid stays meaningful
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / 1.1)
    deg = (raw / raw.mean() * avg_degree).ceil().clamp_(1, n).long()
    deg[torch.rand(n, generator=generator) < frac] = 0
    src = torch.repeat_interleave(torch.arange(n), deg)
    hop = torch.randint(1, 65, (src.numel(),), generator=generator) * (torch.randint(0, 2, (src.numel(),), generator=generator) * 2 - 1)
    far = torch.rand(src.numel(), generator=generator) < 0.01
    dst = torch.where(far, torch.randint(0, n, (src.numel(),), generator=generator), (src + hop) % n)
    keep = src != dst
    key = torch.unique(dst[keep] * n + src[keep])  # sorted by (dst, src), repeats dropped
    dst, src = key // n, key % n
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    out_degree = torch.bincount(src, minlength=n)
    damping = torch.tensor(DAMPING, dtype=torch.float32)
    return tuple(t.to(device) for t in (rowptr.int(), src.int(), out_degree.int(), damping))
