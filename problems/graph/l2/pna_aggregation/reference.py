"""graph/l2/pna_aggregation: Principal Neighbourhood Aggregation (Corso et al. 2020), 4 aggregators x 3 scalers."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, rowptr, col, delta, W, b):
        """x [N, F]; in-edge CSR (rowptr, col = sources); delta 0-d = mean of log(d + 1); W [12F, F_out]."""
        lengths = rowptr[1:] - rowptr[:-1]
        has = (lengths > 0)[:, None]
        deg = lengths.to(x.dtype)[:, None]
        xs = x[col]
        total = torch.segment_reduce(xs, "sum", lengths=lengths, axis=0)
        total_sq = torch.segment_reduce(xs * xs, "sum", lengths=lengths, axis=0)
        mean = total / deg.clamp_min(1)
        mean_sq = total_sq / deg.clamp_min(1)
        lo = torch.where(has, torch.segment_reduce(xs, "min", lengths=lengths, axis=0), 0.0)
        hi = torch.where(has, torch.segment_reduce(xs, "max", lengths=lengths, axis=0), 0.0)
        std = torch.where(has, torch.sqrt(torch.relu(mean_sq - mean * mean) + 1e-5), 0.0)
        aggregators = torch.cat([mean, lo, hi, std], dim=1)  # [N, 4F]
        log_deg = torch.log(deg + 1)
        amplification = log_deg / delta
        attenuation = torch.where(has, delta / log_deg.clamp_min(1e-30), 1.0)
        agg = torch.cat([aggregators, aggregators * amplification, aggregators * attenuation], dim=1)
        return agg @ W + b


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, avg_degree, feat, f_out = shape["n"], shape["avg_degree"], shape["feat"], shape["f_out"]
    # power-law in-degrees (Pareto exponent 2.5), some nodes without in-edges, uniform sources
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / 1.5)
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, n).long()
    deg[torch.rand(n, generator=generator) < 0.05] = 0  # 5% of the nodes have no in-edges
    dst = torch.repeat_interleave(torch.arange(n), deg)
    src = torch.randint(0, n, (dst.numel(),), generator=generator)
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(deg, 0)
    delta = torch.log(deg.double() + 1).mean().float()
    x = torch.randn(n, feat, generator=generator)
    W = torch.randn(12 * feat, f_out, generator=generator) * (12 * feat) ** -0.5
    bias = torch.randn(f_out, generator=generator) * 0.1
    return tuple(t.to(device) for t in (x, rowptr, src, delta, W, bias))
