"""probability/l2/sinkhorn_log_domain: entropic optimal transport by log-domain Sinkhorn iterations.

C_ij = ||x_i - y_j||^2 (exact differences). From f = g = 0, K times:
  f_i = -eps logsumexp_j((g_j - C_ij) / eps + log b_j)
  g_j = -eps logsumexp_i((f_i - C_ij) / eps + log a_i)
then cost = sum_ij exp((f_i + g_j - C_ij) / eps + log a_i + log b_j) C_ij.
C is formed in row blocks (bounded temporaries) and kept in memory up to STORE_LIMIT elements, which
covers every manifest shape; beyond it the blocks are recomputed on every pass (same values).
"""
import torch
import torch.nn as nn

STORE_LIMIT = 2**30  # cost-matrix elements kept in memory across iterations (every manifest shape)
BLOCK_ELEMENTS = 2**25  # (batch, row, column, dim) differences formed at a time


def cost_block(x_rows: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((x_rows[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1)


class CostMatrix:
    """Row blocks of C for a batch, stored or recomputed on every pass."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        batch, n, dim = x.shape
        m = y.shape[1]
        self.x, self.y = x, y
        self.rows = max(1, min(n, BLOCK_ELEMENTS // max(1, batch * m * dim)))
        self.stored = None
        if batch * n * m <= STORE_LIMIT:
            self.stored = [cost_block(xr, y) for xr in x.split(self.rows, 1)]

    def blocks(self):
        if self.stored is not None:
            yield from self.stored
        else:
            for xr in self.x.split(self.rows, 1):
                yield cost_block(xr, self.y)


class Model(nn.Module):
    def __init__(self, iters: int):
        super().__init__()
        self.iters = iters

    def forward(self, x, y, log_a, log_b, eps):
        cost = CostMatrix(x, y)
        f = torch.zeros_like(log_a)
        g = torch.zeros_like(log_b)
        for _ in range(self.iters):
            col_term = (g + eps * log_b)[:, None, :]  # (g_j - C_ij)/eps + log b_j = (g_j + eps log b_j - C_ij)/eps
            f = torch.cat([-eps * torch.logsumexp((col_term - c) / eps, 2) for c in cost.blocks()], 1)
            partial = [torch.logsumexp((fr[:, :, None] - c) / eps + la[:, :, None], 1)
                       for fr, la, c in zip(f.split(cost.rows, 1), log_a.split(cost.rows, 1), cost.blocks())]
            g = -eps * torch.logsumexp(torch.stack(partial), 0)
        total = torch.zeros_like(log_a[:, 0])
        for fr, la, c in zip(f.split(cost.rows, 1), log_a.split(cost.rows, 1), cost.blocks()):
            plan = torch.exp((fr[:, :, None] + g[:, None, :] - c) / eps + la[:, :, None] + log_b[:, None, :])
            total = total + (plan * c).sum((1, 2))
        return f, g, total


def get_init_inputs(shape):
    return {"iters": int(shape["iters"])}


def get_inputs(shape, generator, device):
    """Two Gaussian clouds (the second shifted and stretched) scaled so that C is O(1) for every dim,
    with non-uniform marginals."""
    batch, n, dim = shape["batch"], shape["n"], shape["dim"]
    spread = 0.7 / dim ** 0.5
    x = torch.randn(batch, n, dim, generator=generator) * spread
    shift = torch.randn(batch, 1, dim, generator=generator) * spread
    y = torch.randn(batch, n, dim, generator=generator) * spread * 1.3 + shift
    log_a = torch.log_softmax(0.5 * torch.randn(batch, n, generator=generator), 1)
    log_b = torch.log_softmax(0.5 * torch.randn(batch, n, generator=generator), 1)
    eps = torch.tensor(float(shape["eps"]))
    return tuple(t.to(device) for t in (x, y, log_a, log_b, eps))
