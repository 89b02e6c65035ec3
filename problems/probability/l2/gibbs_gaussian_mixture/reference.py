"""probability/l2/gibbs_gaussian_mixture: blocked Gibbs sampler for a Bayesian Gaussian mixture.

Known log weights log_pi [K] and variance sigma^2; prior mu_k ~ N(0, tau^2 I). Sweep g:
(1) z_i = argmax_k (log pi_k - ||x_i - mu_k||^2 / (2 sigma^2) - log(-log u_gik)) with
    u_gik = cb_uniform(seed, g, i, k) (Gumbel-max sampling of z_i ~ Cat(pi_k N(x_i; mu_k, sigma^2 I)));
(2) n_k, s_k = count and sum of the points with z_i = k; lambda_k = 1/tau^2 + n_k/sigma^2,
    m_k = (s_k / sigma^2) / lambda_k, mu_k = m_k + lambda_k^(-1/2) xi[g, k].
Outputs the final mu [K, D], the final z [N] (int64) and the log joint density
log p(X, z, mu) after every sweep [G] (with all normalising constants).
"""
import math

import torch
import torch.nn as nn

from orchestrator.runner.cbrng import cb_uniform


def gumbel(seed: torch.Tensor, sweep: int, n: int, k: int, dtype, device) -> torch.Tensor:
    """[n, k] Gumbel noise -log(-log u) of the sweep's uniforms (the hash is integer-exact)."""
    rows = torch.arange(n, device=device).view(-1, 1)
    cols = torch.arange(k, device=device).view(1, -1)
    u = cb_uniform(seed, sweep, rows, cols).to(dtype)
    return -torch.log(-torch.log(u))


def log_joint(X, z, mu, log_pi, sigma2: float, tau2: float) -> torch.Tensor:
    n, d = X.shape
    resid = X - mu[z]
    log_lik = (log_pi[z] - (resid * resid).sum(1) / (2 * sigma2)).sum() - 0.5 * n * d * math.log(2 * math.pi * sigma2)
    log_prior = -(mu * mu).sum() / (2 * tau2) - 0.5 * mu.numel() * math.log(2 * math.pi * tau2)
    return log_lik + log_prior


class Model(nn.Module):
    def forward(self, X: torch.Tensor, log_pi: torch.Tensor, mu0: torch.Tensor, xi: torch.Tensor,
                seed: torch.Tensor, sigma2: float, tau2: float):
        n, _ = X.shape
        k = mu0.shape[0]
        x_sq = (X * X).sum(1, keepdim=True)
        mu = mu0
        joints = []
        for g in range(xi.shape[0]):
            dist = x_sq - 2 * X @ mu.T + (mu * mu).sum(1)  # [N, K] squared distances
            scores = log_pi - dist / (2 * sigma2) + gumbel(seed, g, n, k, X.dtype, X.device)
            z = scores.argmax(1)
            counts = torch.bincount(z, minlength=k).to(X.dtype)
            sums = torch.zeros_like(mu0).index_add_(0, z, X)
            precision = 1.0 / tau2 + counts / sigma2
            mu = (sums / sigma2) / precision[:, None] + xi[g] / precision.sqrt()[:, None]
            joints.append(log_joint(X, z, mu, log_pi, sigma2, tau2))
        return mu, z, torch.stack(joints)


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    """Data from a mixture whose means fill a box of side 4 K^(1/D) (neighbouring means ~4 sigma
    apart); the chain starts near the true means (a warm start, as after burn-in)."""
    n, d, k, sweeps = shape["n_points"], shape["dim"], shape["n_comp"], shape["sweeps"]
    sigma2, tau2 = 1.0, 100.0
    side = 4.0 * k ** (1.0 / d)
    true_mu = (torch.rand(k, d, generator=generator) - 0.5) * side
    log_pi = torch.log_softmax(0.5 * torch.randn(k, generator=generator), 0)
    labels = torch.multinomial(log_pi.exp(), n, replacement=True, generator=generator)
    X = true_mu[labels] + math.sqrt(sigma2) * torch.randn(n, d, generator=generator)
    mu0 = true_mu + 0.3 * torch.randn(k, d, generator=generator)
    xi = torch.randn(sweeps, k, d, generator=generator)
    seed = torch.randint(0, 2**62, (), generator=generator, dtype=torch.int64)
    return (X.to(device), log_pi.to(device), mu0.to(device), xi.to(device), seed.to(device), sigma2, tau2)
