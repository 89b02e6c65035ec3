"""biology/l1/lddt_score: lDDT-Calpha of predicted vs reference structures (AlphaFold2's lddt)."""
import torch
import torch.nn as nn

CUTOFF = 15.0
THRESHOLDS = (0.5, 1.0, 2.0, 4.0)


def pair_distances(x):
    """Exact pairwise distances sqrt(sum (x_i - x_j)^2) (no |x|^2 + |y|^2 - 2 x.y expansion)."""
    return torch.sqrt(((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1))


class Model(nn.Module):
    def forward(self, pred, true, mask):
        d_t, d_p = pair_distances(true), pair_distances(pred)
        n = mask.shape[1]
        not_self = 1 - torch.eye(n, dtype=mask.dtype, device=mask.device)
        include = (d_t < CUTOFF).to(mask.dtype) * mask[:, :, None] * mask[:, None, :] * not_self
        err = (d_t - d_p).abs()
        frac = 0.25 * sum((err < t).to(mask.dtype) for t in THRESHOLDS)
        per_res = (1e-10 + (include * frac).sum(-1)) / (1e-10 + include.sum(-1))
        global_score = (1e-10 + (include * frac).sum((-1, -2))) / (1e-10 + include.sum((-1, -2)))
        return per_res, global_score


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    batch, n_res, noise = shape["batch"], shape["n_res"], shape["noise"]
    # compact C-alpha chains: random walk of 3.8 A steps with a persistent direction
    steps = torch.randn(batch, n_res, 3, generator=generator, dtype=torch.float64)
    steps = steps + 0.5 * torch.roll(steps, 1, 1)
    true = torch.cumsum(3.8 * steps / steps.norm(dim=-1, keepdim=True), 1)
    pred = true + noise * torch.randn(batch, n_res, 3, generator=generator, dtype=torch.float64)
    n_valid = n_res - (torch.rand(batch, generator=generator) * 0.1 * n_res).long()
    mask = (torch.arange(n_res)[None, :] < n_valid[:, None]).float()
    return pred.float().to(device), true.float().to(device), mask.to(device)
