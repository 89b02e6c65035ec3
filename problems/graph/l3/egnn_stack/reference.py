"""graph/l3/egnn_stack: L layers of an E(n)-equivariant GNN (Satorras et al. 2021) on k-NN point clouds."""
import torch
import torch.nn as nn
import torch.nn.functional as F

K_NEIGHBOURS = 16
WEIGHT_NAMES = ("edge_w1", "edge_b1", "edge_w2", "edge_b2", "coord_w1", "coord_b1", "coord_w2",
                "node_w1", "node_b1", "node_w2", "node_b2")


class Model(nn.Module):
    """Weights are stacked over layers; every matrix is [in, out] (y = x @ W + b).

    edge_w1 [L, 2F+1+Fe, F] takes [h_i, h_j, |x_i - x_j|^2, a_ij]; coord_w2 [L, F] has no bias;
    node_w1 [L, 2F, F] takes [h_i, sum_j m_ij].
    """

    def __init__(self, **weights):
        super().__init__()
        for name in WEIGHT_NAMES:
            setattr(self, name, nn.Parameter(weights[name]))

    def forward(self, h, x, edge_index, edge_attr):
        src, dst = edge_index[0], edge_index[1]  # j = src, i = dst
        n = h.shape[0]
        deg = torch.bincount(dst, minlength=n).clamp_min(1).to(x.dtype)[:, None]
        for layer in range(self.edge_w1.shape[0]):
            rel = x[dst] - x[src]
            dist2 = (rel * rel).sum(-1, keepdim=True)
            edge_in = torch.cat([h[dst], h[src], dist2, edge_attr], dim=-1)
            m = F.silu(edge_in @ self.edge_w1[layer] + self.edge_b1[layer])
            m = F.silu(m @ self.edge_w2[layer] + self.edge_b2[layer])  # m_ij [E, F]
            s = F.silu(m @ self.coord_w1[layer] + self.coord_b1[layer]) @ self.coord_w2[layer]  # [E]
            x = x + torch.zeros_like(x).index_add_(0, dst, rel * s[:, None]) / deg
            m_sum = torch.zeros_like(h).index_add_(0, dst, m)
            hidden = F.silu(torch.cat([h, m_sum], dim=-1) @ self.node_w1[layer] + self.node_b1[layer])
            h = h + hidden @ self.node_w2[layer] + self.node_b2[layer]
        return h, x


def get_init_inputs(shape):
    layers, feat, fe = shape["n_layers"], shape["feat"], shape["edge_attr_dim"]
    g = torch.Generator().manual_seed(4321)

    def mat(fan_in, fan_out, gain=1.0):
        return torch.randn(layers, fan_in, fan_out, generator=g) * (gain / fan_in ** 0.5)

    def vec(size, scale=0.1):
        return torch.randn(layers, size, generator=g) * scale

    return {
        # [h_i, h_j] rows, the |x_i - x_j|^2 row and the edge-attribute rows are scaled separately
        "edge_w1": torch.cat([mat(2 * feat, feat), mat(1, feat, 0.1), mat(max(fe, 1), feat)[:, :fe]], dim=1),
        "edge_b1": vec(feat),
        "edge_w2": mat(feat, feat), "edge_b2": vec(feat),
        "coord_w1": mat(feat, feat), "coord_b1": vec(feat),
        # small coordinate steps keep the stack stable over 8 layers (EGNN uses gain 0.001 here)
        "coord_w2": torch.randn(layers, feat, generator=g) * (0.1 / feat ** 0.5),
        # messages are summed over k = 16 neighbours: scale their half of node_w1 down
        "node_w1": torch.cat([mat(feat, feat), mat(feat, feat, 1.0 / K_NEIGHBOURS)], dim=1),
        "node_b1": vec(feat),
        "node_w2": mat(feat, feat, 0.5), "node_b2": vec(feat),
    }


def knn_edges(x, n_graphs, nodes_per_graph):
    """Edges j -> i for the k nearest neighbours j of every node i within its graph, sorted by i."""
    k = min(K_NEIGHBOURS, nodes_per_graph - 1)
    pos = x.view(n_graphs, nodes_per_graph, 3).double()
    d2 = ((pos[:, :, None, :] - pos[:, None, :, :]) ** 2).sum(-1)
    d2.diagonal(dim1=1, dim2=2).fill_(float("inf"))
    nearest = d2.topk(k, dim=-1, largest=False).indices  # [G, n, k]; distance ties are measure-zero
    offset = (torch.arange(n_graphs) * nodes_per_graph)[:, None, None]
    src = (nearest + offset).reshape(-1)
    dst = torch.arange(n_graphs * nodes_per_graph).repeat_interleave(k)
    return torch.stack([src, dst])


def get_inputs(shape, generator, device):
    g_count, per_graph = shape["n_graphs"], shape["nodes_per_graph"]
    feat, fe = shape["feat"], shape["edge_attr_dim"]
    n = g_count * per_graph
    x = torch.randn(n, 3, generator=generator) * 2.0  # atoms a few units apart
    edge_index = knn_edges(x, g_count, per_graph)
    h = torch.randn(n, feat, generator=generator)
    edge_attr = torch.randn(edge_index.shape[1], fe, generator=generator)
    return tuple(t.to(device) for t in (h, x, edge_index, edge_attr))
