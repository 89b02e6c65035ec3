"""probability/l2/hmc_leapfrog: HMC (leapfrog + Metropolis) for Bayesian logistic regression, C chains.

U(theta) = sum_i (softplus(x_i . theta) - y_i x_i . theta) + ||theta||^2 / 2,
grad U = X^T (sigmoid(X theta) - y) + theta. Per transition: p = momenta[m];
p -= eps/2 grad; (L - 1) times: theta += eps p, p -= eps grad; theta += eps p; p -= eps/2 grad;
accept iff log_u < H(theta0, p0) - H(theta, p) with H = U + ||p||^2 / 2, else keep theta0.
Outputs are chain-major (the accept-mismatch checker compares each chain up to its first
decision mismatch): samples [C, M, d], accepted [C, M].
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def potential(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = theta @ X.T  # [C, n]
    return (F.softplus(z) - y * z).sum(1) + 0.5 * (theta * theta).sum(1)


def potential_grad(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (torch.sigmoid(theta @ X.T) - y) @ X + theta


class Model(nn.Module):
    def forward(self, X, y, theta0, eps, momenta, log_u, leapfrog: int):
        theta = theta0
        step = eps[:, None]
        samples, accepted = [], []
        for m in range(momenta.shape[0]):
            p0 = momenta[m]
            h0 = potential(theta, X, y) + 0.5 * (p0 * p0).sum(1)
            q = theta
            p = p0 - 0.5 * step * potential_grad(q, X, y)
            for _ in range(leapfrog - 1):
                q = q + step * p
                p = p - step * potential_grad(q, X, y)
            q = q + step * p
            p = p - 0.5 * step * potential_grad(q, X, y)
            h1 = potential(q, X, y) + 0.5 * (p * p).sum(1)
            accept = log_u[m] < h0 - h1  # NaN energies reject
            theta = torch.where(accept[:, None], q, theta)
            samples.append(theta)
            accepted.append(accept)
        return torch.stack(samples, 1), torch.stack(accepted, 1)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    chains, n, d = shape["chains"], shape["n_data"], shape["dim"]
    X = torch.randn(n, d, generator=generator) / math.sqrt(d)
    truth = torch.randn(d, generator=generator) * 2.0
    y = (torch.rand(n, generator=generator) < torch.sigmoid(X @ truth)).float()
    theta0 = truth + 0.3 * torch.randn(chains, d, generator=generator)
    # posterior scale ~ (n/(4d) + 1)^-1/2; leapfrog steps of a fraction of it keep acceptance high
    scale = 1.0 / math.sqrt(n / (4.0 * d) + 1.0)
    eps = scale * (0.6 + 0.8 * torch.rand(chains, generator=generator))
    momenta = torch.randn(shape["transitions"], chains, d, generator=generator)
    log_u = torch.log(torch.rand(shape["transitions"], chains, generator=generator))
    return tuple(t.to(device) for t in (X, y, theta0, eps, momenta, log_u)) + (int(shape["leapfrog"]),)
