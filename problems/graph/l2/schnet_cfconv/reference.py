"""graph/l2/schnet_cfconv: SchNet interaction block (continuous-filter convolution), without the residual."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CUTOFF = 5.0  # Angstrom
ATOMS_PER_CLUSTER = 128
WEIGHT_NAMES = ("w1", "b1", "w2", "b2", "w_in", "w_o1", "b_o1", "w_o2", "b_o2")


def ssp(z):
    """Shifted softplus: softplus(z) - ln 2."""
    return F.softplus(z) - math.log(2.0)


class Model(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        for name in WEIGHT_NAMES:
            setattr(self, name, nn.Parameter(weights[name]))

    def forward(self, h, pos, edge_index):
        src, dst = edge_index[0], edge_index[1]
        n_rbf = self.w1.shape[0]
        d = (pos[src] - pos[dst]).norm(dim=-1, keepdim=True)  # [E, 1]
        mu = torch.linspace(0.0, CUTOFF, n_rbf, dtype=h.dtype, device=h.device)
        rbf = torch.exp(-10.0 * (d - mu) ** 2)  # [E, K]
        envelope = 0.5 * (torch.cos(math.pi * d / CUTOFF) + 1.0)
        filters = (ssp(rbf @ self.w1 + self.b1) @ self.w2 + self.b2) * envelope  # [E, F]
        x = h @ self.w_in
        m = torch.zeros_like(x).index_add_(0, dst, x[src] * filters)
        return ssp(m @ self.w_o1 + self.b_o1) @ self.w_o2 + self.b_o2


def get_init_inputs(shape):
    feat, n_rbf = shape["feat"], shape["n_rbf"]
    g = torch.Generator().manual_seed(2017)

    def mat(rows, cols):
        return torch.randn(rows, cols, generator=g) * rows ** -0.5

    def vec(size):
        return torch.randn(size, generator=g) * 0.1

    return {"w1": mat(n_rbf, feat), "b1": vec(feat), "w2": mat(feat, feat), "b2": vec(feat),
            "w_in": mat(feat, feat), "w_o1": mat(feat, feat), "b_o1": vec(feat),
            "w_o2": mat(feat, feat), "b_o2": vec(feat)}


def radius_edges(pos, clusters):
    """Edges j -> i for every pair closer than CUTOFF within a cluster, sorted by (i, j)."""
    p = pos.view(clusters, ATOMS_PER_CLUSTER, 3).double()
    d2 = ((p[:, :, None, :] - p[:, None, :, :]) ** 2).sum(-1)
    close = d2 < CUTOFF ** 2
    close.diagonal(dim1=1, dim2=2).fill_(False)
    g, i, j = close.nonzero(as_tuple=True)  # lexicographic: sorted by (cluster, i, j)
    offset = g * ATOMS_PER_CLUSTER
    return torch.stack([offset + j, offset + i])


def get_inputs(shape, generator, device):
    clusters = max(1, shape["n_atoms"] // ATOMS_PER_CLUSTER)
    n = clusters * ATOMS_PER_CLUSTER
    # atoms uniform in balls whose density gives about avg_neighbors within the cutoff
    density = shape["avg_neighbors"] / (4.0 / 3.0 * math.pi * CUTOFF ** 3)
    radius = (ATOMS_PER_CLUSTER / density / (4.0 / 3.0 * math.pi)) ** (1.0 / 3.0)
    direction = torch.randn(n, 3, generator=generator)
    direction = direction / direction.norm(dim=1, keepdim=True)
    pos = direction * radius * torch.rand(n, 1, generator=generator) ** (1.0 / 3.0)
    pos = pos + (torch.arange(clusters) * 4 * (radius + CUTOFF)).repeat_interleave(ATOMS_PER_CLUSTER)[:, None]
    edge_index = radius_edges(pos, clusters)
    h = torch.randn(n, shape["feat"], generator=generator)
    return tuple(t.to(device) for t in (h, pos, edge_index))
