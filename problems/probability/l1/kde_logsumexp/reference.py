"""probability/l1/kde_logsumexp: Gaussian kernel density estimate (log-density) at many query points.

log p(y) = logsumexp_i(-||y - x_i||^2 / (2 h^2)) - log N - (D/2) log(2 pi h^2). Squared
distances are formed from exact differences (y - x)^2 summed over D, never by the norm
expansion ||y||^2 - 2 y.x + ||x||^2, whose cancellation would dominate at small bandwidths.
"""
import math

import torch
import torch.nn as nn

PAIR_CHUNK = 2**24  # (query, sample, dim) elements materialised at a time


class Model(nn.Module):
    def forward(self, samples: torch.Tensor, queries: torch.Tensor, bandwidth: torch.Tensor):
        n, dim = samples.shape
        inv = 1.0 / (2.0 * bandwidth * bandwidth)
        q_chunk = min(queries.shape[0], 4096)
        s_chunk = max(1, PAIR_CHUNK // (q_chunk * dim))
        out = []
        for q in queries.split(q_chunk):
            # streaming logsumexp over sample chunks: running max and rescaled sum
            run_max = torch.full((q.shape[0],), -math.inf, dtype=q.dtype, device=q.device)
            run_sum = torch.zeros(q.shape[0], dtype=q.dtype, device=q.device)
            for s in samples.split(s_chunk):
                logk = -((q[:, None, :] - s[None, :, :]) ** 2).sum(-1) * inv
                new_max = torch.maximum(run_max, logk.max(1).values)
                run_sum = run_sum * torch.exp(run_max - new_max) + torch.exp(logk - new_max[:, None]).sum(1)
                run_max = new_max
            out.append(run_max + torch.log(run_sum))
        log_norm = math.log(n) + 0.5 * dim * torch.log(2 * math.pi * bandwidth * bandwidth)
        return torch.cat(out) - log_norm


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, m, dim = shape["n_samples"], shape["n_queries"], shape["dim"]
    # samples from a mixture of 8 Gaussian blobs; queries near and between them
    centres = torch.randn(8, dim, generator=generator) * 2.0
    samples = centres[torch.randint(0, 8, (n,), generator=generator)] + torch.randn(n, dim, generator=generator)
    queries = centres[torch.randint(0, 8, (m,), generator=generator)] + 1.5 * torch.randn(m, dim, generator=generator)
    bandwidth = torch.tensor(float(shape["bandwidth"]))
    return samples.to(device), queries.to(device), bandwidth.to(device)
