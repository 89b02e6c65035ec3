"""graph/l2/gat_attention: one multi-head GAT layer (Velickovic et al. 2018; PyG GATConv, concat=True)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, W, att_src, att_dst, bias):
        super().__init__()
        self.W = nn.Parameter(W)              # [F_in, H*F']
        self.att_src = nn.Parameter(att_src)  # [H, F']
        self.att_dst = nn.Parameter(att_dst)  # [H, F']
        self.bias = nn.Parameter(bias)        # [H*F']

    def forward(self, x, src, dst):
        """x [N, F_in]; src, dst int64 [E] sorted by dst, self-loops included."""
        n = x.shape[0]
        heads, f_head = self.att_src.shape
        wh = (x @ self.W).view(n, heads, f_head)
        a_s = (wh * self.att_src).sum(-1)  # [N, H]
        a_d = (wh * self.att_dst).sum(-1)
        e = F.leaky_relu(a_s[src] + a_d[dst], 0.2)  # [E, H]
        idx = dst[:, None].expand_as(e)
        emax = torch.full((n, heads), -torch.inf, dtype=x.dtype, device=x.device)
        emax = emax.scatter_reduce(0, idx, e, "amax")
        p = torch.exp(e - emax[dst])
        denom = torch.zeros(n, heads, dtype=x.dtype, device=x.device).index_add_(0, dst, p)
        alpha = p / denom[dst]  # softmax over each destination's incoming edges, per head
        out = torch.zeros(n, heads, f_head, dtype=x.dtype, device=x.device)
        out.index_add_(0, dst, alpha[..., None] * wh[src])
        return out.reshape(n, heads * f_head) + self.bias


def get_init_inputs(shape):
    f_in, heads, f_head = shape["f_in"], shape["heads"], shape["f_head"]
    g = torch.Generator().manual_seed(1234)
    return {
        "W": torch.randn(f_in, heads * f_head, generator=g) * f_in ** -0.5,
        "att_src": torch.randn(heads, f_head, generator=g) * f_head ** -0.5,
        "att_dst": torch.randn(heads, f_head, generator=g) * f_head ** -0.5,
        "bias": torch.randn(heads * f_head, generator=g) * 0.1,
    }


def get_inputs(shape, generator, device):
    n, avg_degree, f_in = shape["n"], shape["avg_degree"], shape["f_in"]
    n_edges = n * avg_degree
    src = torch.randint(0, n, (n_edges,), generator=generator)
    dst = torch.randint(0, n, (n_edges,), generator=generator)
    keep = src != dst  # duplicates stay (a multigraph); each copy is its own softmax term
    src = torch.cat([src[keep], torch.arange(n)])
    dst = torch.cat([dst[keep], torch.arange(n)])
    order = torch.argsort(dst * n + src)  # CSR-by-destination order
    x = torch.randn(n, f_in, generator=generator)
    return tuple(t.to(device) for t in (x, src[order], dst[order]))
