"""graph/l3/mpnn_edge_network_gru: MPNN with edge-network messages and GRU updates (Gilmer et al. 2017)."""
import torch
import torch.nn as nn

EDGE_HIDDEN = 128
WEIGHT_NAMES = ("edge_w1", "edge_b1", "edge_w2", "edge_b2", "msg_bias", "gru_w_ih", "gru_w_hh", "gru_b_ih",
                "gru_b_hh", "out_w1", "out_b1", "out_w2", "out_b2")


class Model(nn.Module):
    """Edge network (NNConv) weights are [in, out] (y = x @ W + b); the GRU weights follow
    torch.nn.GRUCell ([3F, F], gate order r, z, n); the readout MLP is [in, out] too."""

    def __init__(self, steps, **weights):
        super().__init__()
        self.steps = int(steps)
        for name in WEIGHT_NAMES:
            setattr(self, name, nn.Parameter(weights[name]))

    def forward(self, h0, edge_index, edge_attr, graph_ptr):
        n, feat = h0.shape
        src, dst = edge_index[0], edge_index[1]
        hidden = torch.relu(edge_attr @ self.edge_w1 + self.edge_b1)
        a_e = (hidden @ self.edge_w2 + self.edge_b2).view(-1, feat, feat)  # [E, F, F], row = output feature
        h = h0
        for _ in range(self.steps):
            msg = torch.bmm(a_e, h[src].unsqueeze(-1)).squeeze(-1)
            m = torch.zeros_like(h).index_add_(0, dst, msg) + self.msg_bias
            h = torch.gru_cell(m, h, self.gru_w_ih, self.gru_w_hh, self.gru_b_ih, self.gru_b_hh)
        n_graphs = graph_ptr.numel() - 1
        graph_of = torch.repeat_interleave(torch.arange(n_graphs, device=h.device), graph_ptr[1:] - graph_ptr[:-1])
        g = torch.zeros(n_graphs, feat, dtype=h.dtype, device=h.device).index_add_(0, graph_of, h)
        pred = (torch.relu(g @ self.out_w1 + self.out_b1) @ self.out_w2 + self.out_b2).squeeze(-1)
        return h, pred


def get_init_inputs(shape):
    feat, fe = shape["feat"], shape["edge_attr_dim"]
    g = torch.Generator().manual_seed(2017)

    def mat(fan_in, fan_out, gain=1.0):
        return torch.randn(fan_in, fan_out, generator=g) * (gain / fan_in ** 0.5)

    def vec(size, scale=0.1):
        return torch.randn(size, generator=g) * scale

    bound = feat ** -0.5  # torch.nn.GRUCell's uniform initialisation range
    return {
        "steps": shape["steps"],
        "edge_w1": mat(fe, EDGE_HIDDEN), "edge_b1": vec(EDGE_HIDDEN),
        # A_e h sums F products over ~2 bonds per atom: scale A_e to keep messages O(1)
        "edge_w2": mat(EDGE_HIDDEN, feat * feat, feat ** -0.5), "edge_b2": vec(feat * feat, 0.3 / feat),
        "msg_bias": vec(feat),
        "gru_w_ih": (torch.rand(3 * feat, feat, generator=g) * 2 - 1) * bound,
        "gru_w_hh": (torch.rand(3 * feat, feat, generator=g) * 2 - 1) * bound,
        "gru_b_ih": (torch.rand(3 * feat, generator=g) * 2 - 1) * bound,
        "gru_b_hh": (torch.rand(3 * feat, generator=g) * 2 - 1) * bound,
        "out_w1": mat(feat, feat), "out_b1": vec(feat),
        "out_w2": mat(feat, 1), "out_b2": vec(1),
    }


def molecule_batch(n_graphs, atoms_per_graph, generator):
    """Molecule-like graphs: a branched chain (each atom bonds to one of the 3 previous atoms) plus
    ring-closing bonds, sizes uniform in [0.75, 1.25] x atoms_per_graph. Returns bonds (u < v) and graph_ptr."""
    low, high = -(-3 * atoms_per_graph // 4), 5 * atoms_per_graph // 4
    sizes = torch.randint(low, high + 1, (n_graphs,), generator=generator)
    graph_ptr = torch.zeros(n_graphs + 1, dtype=torch.long)
    graph_ptr[1:] = torch.cumsum(sizes, 0)
    n = int(graph_ptr[-1])
    graph_of = torch.repeat_interleave(torch.arange(n_graphs), sizes)
    local = torch.arange(n) - graph_ptr[graph_of]
    child = torch.nonzero(local > 0).flatten()
    back = (torch.rand(child.numel(), generator=generator) * local[child].clamp_max(3)).long() + 1
    rings_per_graph = sizes // 6
    ring_graph = torch.repeat_interleave(torch.arange(n_graphs), rings_per_graph)
    ring_u = (torch.rand(ring_graph.numel(), generator=generator) * sizes[ring_graph]).long()
    ring_v = (torch.rand(ring_graph.numel(), generator=generator) * sizes[ring_graph]).long()
    keep = ring_u != ring_v
    u = torch.cat([child - back, (graph_ptr[ring_graph] + ring_u)[keep]])
    v = torch.cat([child, (graph_ptr[ring_graph] + ring_v)[keep]])
    bonds = torch.unique(torch.minimum(u, v) * n + torch.maximum(u, v))
    return bonds // n, bonds % n, graph_ptr


def get_inputs(shape, generator, device):
    feat, fe = shape["feat"], shape["edge_attr_dim"]
    u, v, graph_ptr = molecule_batch(shape["n_graphs"], shape["atoms_per_graph"], generator)
    n = int(graph_ptr[-1])
    bond_attr = torch.randn(u.numel(), fe, generator=generator)
    # both directions of every bond share its attributes; edges sorted by (dst, src)
    src, dst = torch.cat([u, v]), torch.cat([v, u])
    order = torch.argsort(dst * n + src)
    edge_index = torch.stack([src[order], dst[order]])
    edge_attr = torch.cat([bond_attr, bond_attr])[order]
    h0 = torch.randn(n, feat, generator=generator)
    return tuple(t.to(device) for t in (h0, edge_index, edge_attr, graph_ptr))
