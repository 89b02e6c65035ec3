"""probability/l2/kalman_filter: batched linear Kalman filter with missing observations (Joseph form).

B systems share F, H, Q, R (constructor tensors) but have their own observation masks, so
their covariances differ. Per step: predict m = F m, P = F P F^T + Q; if observed,
S = H P H^T + R, L = chol(S), K = P H^T S^-1 (cholesky_solve), e = y - H m, m += K e,
P = (I - K H) P (I - K H)^T + K R K^T, ll += -0.5 (e^T S^-1 e + 2 sum log diag L + dy log 2 pi).
"""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, F, H, Q, R):
        super().__init__()
        for name, value in (("F", F), ("H", H), ("Q", Q), ("R", R)):
            self.register_buffer(name, value)

    def forward(self, y: torch.Tensor, obs_mask: torch.Tensor, m0: torch.Tensor, P0: torch.Tensor):
        batch, steps, dy = y.shape
        dx = m0.shape[1]
        # batch-expanded views: every product below is a plain bmm (2-D @ 3-D takes a slow path on CPU)
        F, H, Q, R = (w.expand(batch, *w.shape) for w in (self.F, self.H, self.Q, self.R))
        Ft, Ht = F.transpose(1, 2), H.transpose(1, 2)
        eye = torch.eye(dx, dtype=m0.dtype, device=m0.device).expand(batch, dx, dx)
        m = m0[:, :, None]
        P = P0.expand(batch, dx, dx)
        loglik = torch.zeros(batch, dtype=m0.dtype, device=m0.device)
        means = []
        for t in range(steps):
            m = F @ m
            P = F @ P @ Ft + Q
            HP = H @ P  # [B, dy, dx]
            S = HP @ Ht + R
            L = torch.linalg.cholesky(S)
            K = torch.cholesky_solve(HP, L).transpose(1, 2)  # P H^T S^-1 (S symmetric)
            e = y[:, t, :, None] - H @ m
            m_upd = m + K @ e
            A = eye - K @ H
            P_upd = A @ P @ A.transpose(1, 2) + K @ R @ K.transpose(1, 2)
            mahal = (e.transpose(1, 2) @ torch.cholesky_solve(e, L))[:, 0, 0]
            logdet = 2 * torch.log(torch.diagonal(L, dim1=1, dim2=2)).sum(1)
            ll_t = -0.5 * (mahal + logdet + dy * math.log(2 * math.pi))
            seen = obs_mask[:, t]
            m = torch.where(seen[:, None, None], m_upd, m)
            P = torch.where(seen[:, None, None], P_upd, P)
            loglik = loglik + torch.where(seen, ll_t, torch.zeros_like(ll_t))
            means.append(m[:, :, 0])
        return torch.stack(means, 1), P, loglik


def get_init_inputs(shape):
    dx, dy = shape["dx"], shape["dy"]
    gen = torch.Generator().manual_seed(4242)
    q, _ = torch.linalg.qr(torch.randn(dx, dx, generator=gen, dtype=torch.float64))
    radii = 0.8 + 0.15 * torch.rand(dx, generator=gen, dtype=torch.float64)
    F = q @ torch.diag(radii) @ q.T + 0.1 * torch.randn(dx, dx, generator=gen, dtype=torch.float64) / math.sqrt(dx)
    H = torch.randn(dy, dx, generator=gen, dtype=torch.float64) / math.sqrt(dx)
    gq = torch.randn(dx, dx, generator=gen, dtype=torch.float64) / math.sqrt(dx)
    gr = torch.randn(dy, dy, generator=gen, dtype=torch.float64) / math.sqrt(dy)
    Q = 0.1 * torch.eye(dx, dtype=torch.float64) + 0.05 * gq @ gq.T
    R = 0.5 * torch.eye(dy, dtype=torch.float64) + 0.2 * gr @ gr.T
    return {name: t.float() for name, t in (("F", F), ("H", H), ("Q", Q), ("R", R))}


def get_inputs(shape, generator, device):
    batch, steps, dx, dy = shape["n_systems"], shape["T"], shape["dx"], shape["dy"]
    p = {k: v.double() for k, v in get_init_inputs(shape).items()}
    lq, lr = torch.linalg.cholesky(p["Q"]), torch.linalg.cholesky(p["R"])
    P0 = torch.eye(dx, dtype=torch.float64)
    m0 = torch.randn(batch, dx, generator=generator, dtype=torch.float64)
    x = m0 + torch.randn(batch, dx, generator=generator, dtype=torch.float64)  # x0 ~ N(m0, P0)
    ys = []
    for _ in range(steps):  # simulate the systems themselves
        x = x @ p["F"].T + torch.randn(batch, dx, generator=generator, dtype=torch.float64) @ lq.T
        ys.append(x @ p["H"].T + torch.randn(batch, dy, generator=generator, dtype=torch.float64) @ lr.T)
    y = torch.stack(ys, 1).float()
    obs_mask = torch.rand(batch, steps, generator=generator) >= shape["missing_frac"]
    return y.to(device), obs_mask.to(device), m0.float().to(device), P0.float().to(device)
