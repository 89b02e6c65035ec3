"""probability/l2/gp_posterior_cholesky: batched GP regression posterior (Rasmussen & Williams, Algorithm 2.1).

G independent tasks, squared-exponential ARD kernel k(x, x') = sf2 exp(-0.5 sum_d (x_d - x'_d)^2 / l_d^2):
L = cholesky(K + sn2 I); alpha = L^T \\ (L \\ y); mu = K*^T alpha; v = L \\ K*; var = sf2 - sum v^2;
lml = -0.5 y^T alpha - sum log diag L - (n/2) log 2 pi. Squared distances use exact differences.
"""
import math

import torch
import torch.nn as nn


KERNEL_CHUNK = 2**26  # (task, p, q, d) differences materialised at a time


def se_kernel(a: torch.Tensor, b: torch.Tensor, lengthscales: torch.Tensor, sf2: torch.Tensor) -> torch.Tensor:
    """[G, p, q] squared-exponential ARD kernel from [G, p, D] and [G, q, D] (exact differences)."""
    a = a / lengthscales[:, None, :]
    b = b / lengthscales[:, None, :]
    chunk = max(1, KERNEL_CHUNK // (a.shape[1] * b.shape[1] * a.shape[2]))
    d2 = torch.cat([((ac[:, :, None, :] - bc[:, None, :, :]) ** 2).sum(-1)
                    for ac, bc in zip(a.split(chunk), b.split(chunk))])
    return sf2[:, None, None] * torch.exp(-0.5 * d2)


class Model(nn.Module):
    def forward(self, x, y, x_test, lengthscales, signal_var, noise_var):
        n = x.shape[1]
        k_train = se_kernel(x, x, lengthscales, signal_var)
        k_train = k_train + noise_var[:, None, None] * torch.eye(n, dtype=x.dtype, device=x.device)
        chol = torch.linalg.cholesky(k_train)
        alpha = torch.cholesky_solve(y[:, :, None], chol)  # [G, n, 1]
        k_cross = se_kernel(x, x_test, lengthscales, signal_var)  # [G, n, m]
        mean = (k_cross * alpha).sum(1)
        v = torch.linalg.solve_triangular(chol, k_cross, upper=False)
        var = signal_var[:, None] - (v * v).sum(1)
        lml = (-0.5 * (y * alpha[:, :, 0]).sum(1) - torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
               - 0.5 * n * math.log(2 * math.pi))
        return mean, var, lml


def tolerance_scale(inputs, output):
    """Magnitudes the errors scale with: sf2 for mean and var (the prior variance: var = sf2 - sum v^2
    cancels down to ~sn2 near the data, and the mean's error follows the same Cholesky factor);
    for lml the magnitudes of its terms, |lml| + (n/2) (log 2 pi + |log(sf2 + sn2)|)."""
    x, y, x_test, lengthscales, signal_var, noise_var = inputs
    mean, var, lml = output
    n = x.shape[1]
    sf2 = signal_var[:, None].expand_as(var)
    lml_terms = 0.5 * n * math.log(2 * math.pi) + 0.5 * n * torch.log(signal_var + noise_var).abs() + lml.abs()
    return sf2.expand_as(mean), sf2, lml_terms


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    """Inputs in the unit cube, ARD lengthscales in [0.3, 1.2] sqrt(D), targets drawn from the GP prior
    (random Fourier features of the same kernel) plus noise; noise variance sf2 * [0.01, 0.1]."""
    tasks, n, m, dim = shape["n_tasks"], shape["n_train"], shape["n_test"], shape["dim"]
    x = torch.rand(tasks, n, dim, generator=generator)
    x_test = torch.rand(tasks, m, dim, generator=generator) * 1.2 - 0.1  # some queries extrapolate
    lengthscales = (0.3 + 0.9 * torch.rand(tasks, dim, generator=generator)) * math.sqrt(dim) * 0.5
    signal_var = 0.5 + 1.5 * torch.rand(tasks, generator=generator)
    noise_var = signal_var * 10 ** (-2 + torch.rand(tasks, generator=generator))
    features = 256
    omega = torch.randn(tasks, features, dim, generator=generator) / lengthscales[:, None, :]
    phase = 2 * math.pi * torch.rand(tasks, features, generator=generator)
    weights = torch.randn(tasks, features, generator=generator)
    f = torch.cos(x @ omega.transpose(1, 2) + phase[:, None, :]) @ weights[:, :, None]
    f = f[:, :, 0] * torch.sqrt(2 * signal_var[:, None] / features)
    y = f + torch.sqrt(noise_var)[:, None] * torch.randn(tasks, n, generator=generator)
    return tuple(t.to(device) for t in (x, y, x_test, lengthscales, signal_var, noise_var))
