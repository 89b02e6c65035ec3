"""probability/l1/mmd_rbf_unbiased: unbiased multi-bandwidth RBF MMD^2 (Gretton et al. 2012).

MMD^2_s = sum_{i != j} k_s(x_i, x_j) / (n (n-1)) + sum_{i != j} k_s(y_i, y_j) / (m (m-1))
          - 2 sum_{i,j} k_s(x_i, y_j) / (n m),   k_s(a, b) = exp(-||a - b||^2 / (2 sigma_s^2)).
Squared distances come from exact differences, blocks of kernel values are summed in float64,
and the diagonal terms (exactly 1: the distance of a point to itself is exactly 0) are removed.
"""
import torch
import torch.nn as nn

PAIR_CHUNK = 2**24  # (row, column, dim) elements materialised at a time


def kernel_sums(a: torch.Tensor, b: torch.Tensor, bandwidths: torch.Tensor) -> torch.Tensor:
    """sum_{i,j} exp(-||a_i - b_j||^2 / (2 sigma_s^2)) for every bandwidth, accumulated in float64."""
    dim = a.shape[1]
    rows = max(1, min(a.shape[0], 1024))
    cols = max(1, PAIR_CHUNK // (rows * dim))
    inv = (1.0 / (2.0 * bandwidths * bandwidths))[:, None, None]
    total = torch.zeros(bandwidths.shape[0], dtype=torch.float64, device=a.device)
    for ai in a.split(rows):
        for bj in b.split(cols):
            d2 = ((ai[:, None, :] - bj[None, :, :]) ** 2).sum(-1)
            total += torch.exp(-d2[None] * inv).double().sum((1, 2))
    return total


class Model(nn.Module):
    def forward(self, X: torch.Tensor, Y: torch.Tensor, bandwidths: torch.Tensor):
        n, m = X.shape[0], Y.shape[0]
        kxx = (kernel_sums(X, X, bandwidths) - n) / (n * (n - 1))
        kyy = (kernel_sums(Y, Y, bandwidths) - m) / (m * (m - 1))
        kxy = kernel_sums(X, Y, bandwidths) / (n * m)
        mmd2 = kxx + kyy - 2.0 * kxy
        return mmd2.to(X.dtype), mmd2.sum().to(X.dtype)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, dim, s = shape["n"], shape["dim"], shape["n_bandwidths"]
    X = torch.randn(n, dim, generator=generator)
    # Y: a slightly shifted and stretched distribution, so MMD^2 is small but clearly positive
    Y = 1.1 * torch.randn(n, dim, generator=generator) + 0.1
    base = float(dim) ** 0.5
    bandwidths = base * torch.logspace(-0.5, 1.0, s) * (0.8 + 0.4 * torch.rand(s, generator=generator))
    return X.to(device), Y.to(device), bandwidths.to(device)
