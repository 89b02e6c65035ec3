"""graph/l3/sampled_graphsage_minibatch: 2-hop neighbour sampling (counter-based keys), dedup, 2 SAGE-mean layers."""
import torch
import torch.nn as nn

from orchestrator.runner.cbrng import cb_u32

WEIGHT_NAMES = ("w_self1", "w_neigh1", "b1", "w_self2", "w_neigh2", "b2")


def sample_neighbours(rowptr, col, nodes, fanout, hop, seed):
    """For each of `nodes`: all neighbours if its degree d <= fanout, else the `fanout` list positions p
    with the smallest (cb_u32(seed, hop, v, p), p). Returns (owner index into nodes, neighbour id)."""
    start = rowptr[nodes]
    deg = rowptr[nodes + 1] - start
    owner = torch.repeat_interleave(torch.arange(nodes.numel(), device=nodes.device), deg)
    first = torch.cumsum(deg, 0) - deg
    pos = torch.arange(owner.numel(), device=nodes.device) - first[owner]
    key = cb_u32(seed, hop, nodes[owner], pos)  # uint32 held in int64
    # entries are in (owner, p) order, so a stable sort by (owner, key) orders them by (owner, key, p)
    order = torch.sort(owner * 2 ** 32 + key, stable=True).indices
    rank = torch.arange(order.numel(), device=nodes.device) - first[owner[order]]
    chosen = order[rank < fanout]
    return owner[chosen], col[start[owner[chosen]] + pos[chosen]]


def neighbour_mean(values, owner, count):
    """Mean of the rows of `values` per owner (count owners); 0 for an owner without samples."""
    total = torch.zeros(count, values.shape[1], dtype=values.dtype, device=values.device).index_add_(0, owner, values)
    size = torch.bincount(owner, minlength=count).clamp_min(1).to(values.dtype)
    return total / size[:, None]


class Model(nn.Module):
    """SAGEConv-mean layers, weights [in, out]: h = relu(x_u @ w_self1 + mean_{w in S2(u)} x_w @ w_neigh1 + b1),
    logits = h_v @ w_self2 + mean_{u in S1(v)} h_u @ w_neigh2 + b2."""

    def __init__(self, fanout1, fanout2, **weights):
        super().__init__()
        self.fanout1, self.fanout2 = int(fanout1), int(fanout2)
        for name in WEIGHT_NAMES:
            setattr(self, name, nn.Parameter(weights[name]))

    def forward(self, rowptr, col, x, seeds, seed):
        owner1, s1 = sample_neighbours(rowptr, col, seeds, self.fanout1, 1, seed)
        n1 = torch.unique(torch.cat([seeds, s1]))  # sorted
        owner2, s2 = sample_neighbours(rowptr, col, n1, self.fanout2, 2, seed)
        agg1 = neighbour_mean(x[s2], owner2, n1.numel())
        h = torch.relu(x[n1] @ self.w_self1 + agg1 @ self.w_neigh1 + self.b1)  # [|N1|, hidden]
        agg2 = neighbour_mean(h[torch.searchsorted(n1, s1)], owner1, seeds.numel())
        return h[torch.searchsorted(n1, seeds)] @ self.w_self2 + agg2 @ self.w_neigh2 + self.b2


def get_init_inputs(shape):
    feat, hidden, classes = shape["feat"], shape["hidden"], shape["classes"]
    g = torch.Generator().manual_seed(1025)

    def mat(fan_in, fan_out):
        return torch.randn(fan_in, fan_out, generator=g) / fan_in ** 0.5

    return {
        "fanout1": shape["fanout1"], "fanout2": shape["fanout2"],
        "w_self1": mat(feat, hidden), "w_neigh1": mat(feat, hidden), "b1": torch.randn(hidden, generator=g) * 0.1,
        "w_self2": mat(hidden, classes), "w_neigh2": mat(hidden, classes), "b2": torch.randn(classes, generator=g) * 0.1,
    }


def get_inputs(shape, generator, device):
    n, avg_degree, batch, feat = shape["n"], shape["avg_degree"], shape["batch"], shape["feat"]
    # Chung-Lu style power-law out-degrees (Pareto exponent 2.1, capped at n / 100, ~3% isolated), uniform random
    # neighbours in list order (not sorted; a rare repeat counts twice, as a multi-edge)
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    raw = (1 - u) ** (-1.0 / 1.1)
    deg = (raw / raw.mean() * avg_degree).floor().clamp_(0, max(n // 100, avg_degree)).long()
    deg[torch.rand(n, generator=generator) < 0.03] = 0
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(deg, 0)
    col = torch.randint(0, n, (int(rowptr[-1]),), generator=generator)
    x = torch.rand(n, feat, generator=generator) * 2 - 1
    seeds = torch.randperm(n, generator=generator)[:batch]
    seed = torch.randint(0, 2 ** 62, (), generator=generator)
    return tuple(t.to(device) for t in (rowptr, col, x, seeds, seed))
