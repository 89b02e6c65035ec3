"""probability/l1/gmm_log_likelihood: Gaussian-mixture log-likelihood and responsibilities (full covariances).

log N_nk = -1/2 ||L_k^-1 (x_n - mu_k)||^2 - sum_i log L_k,ii - D/2 log 2 pi,
log p(x_n) = logsumexp_k (log w_k + log N_nk), resp_nk = softmax_k (log w_k + log N_nk).
L_k^-1 is formed once in float64 (triangular solve against I) and cast to the input dtype;
z = L_k^-1 (x - mu_k) uses exact differences.
"""
import math

import torch
import torch.nn as nn

CHUNK_ELEMENTS = 2**26  # [points, components, dim] elements materialised at a time


class Model(nn.Module):
    def forward(self, X, log_weights, means, scale_tril):
        n, dim = X.shape
        n_comp = means.shape[0]
        eye = torch.eye(dim, dtype=torch.float64, device=X.device).expand(n_comp, dim, dim)
        prec = torch.linalg.solve_triangular(scale_tril.double(), eye, upper=False).to(X.dtype)  # L^-1
        log_det = torch.log(torch.diagonal(scale_tril, dim1=1, dim2=2)).sum(1)
        const = log_weights - log_det - 0.5 * dim * math.log(2 * math.pi)
        chunk = max(1, CHUNK_ELEMENTS // (n_comp * dim))
        joint = []
        for x in X.split(chunk):
            z = torch.einsum("kde,nke->nkd", prec, x[:, None, :] - means[None])
            joint.append(const[None, :] - 0.5 * (z * z).sum(-1))
        joint = torch.cat(joint)
        log_prob = torch.logsumexp(joint, 1)
        return log_prob, torch.exp(joint - log_prob[:, None])


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, dim, k = shape["n_points"], shape["dim"], shape["n_comp"]
    means = 3.0 * torch.randn(k, dim, generator=generator)
    a = torch.randn(k, dim, dim, generator=generator, dtype=torch.float64) / math.sqrt(dim)
    cov = a @ a.transpose(1, 2) + 0.3 * torch.eye(dim, dtype=torch.float64)
    scale_tril = torch.linalg.cholesky(cov)
    log_weights = torch.log_softmax(torch.randn(k, generator=generator, dtype=torch.float64), 0)
    comp = torch.multinomial(log_weights.exp(), n, replacement=True, generator=generator)
    noise = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    # x_n = mu_c + L_c noise_n, one GEMM per component: gathering L per point ([n, dim, dim]
    # float64) took 2 TiB of host memory at the largest shapes
    X = torch.empty(n, dim)
    for c, rows in enumerate(torch.argsort(comp, stable=True).split(torch.bincount(comp, minlength=k).tolist())):
        X[rows] = (means[c].double() + noise[rows] @ scale_tril[c].T).float()
    return X.to(device), log_weights.float().to(device), means.to(device), scale_tril.float().to(device)
