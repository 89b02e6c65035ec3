"""Oracle for graph/l3/egnn_stack.

Per layer: phi_e's first Linear is split into h @ W_a and h @ W_b per node (no [E, 2F+1+Fe]
concat), the edge kernel gathers those, adds the distance and edge-attribute terms and SiLU;
GEMM kernels carry bias, SiLU, the residual and phi_x's final dot product in their epilogues;
the neighbour sums run per block of destination nodes as a one-hot matrix product over their
(dst-sorted) edges, so no atomics and a fixed summation order.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

WEIGHT_NAMES = ("edge_w1", "edge_b1", "edge_w2", "edge_b2", "coord_w1", "coord_b1", "coord_w2",
                "node_w1", "node_b1", "node_w2", "node_b2")


@triton.jit
def _silu(v):
    return v / (1.0 + tl.exp(-v))


@triton.jit
def _linear_kernel(x1, w1, x2, w2, bias, resid, rowvec, out, m, n, k1, k2,
                   HAS_X2: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
                   HAS_RESID: tl.constexpr, ROW_DOT: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out = act(x1 @ w1 [+ x2 @ w2] [+ bias]) [+ resid]; with ROW_DOT, out[i] = act(...)[i, :] . rowvec."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < m
    col_ok = cols < n
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, k1, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x1 + rows[:, None] * k1 + ks[None, :], mask=row_ok[:, None] & (ks < k1)[None, :], other=0.0)
        b = tl.load(w1 + ks[:, None] * n + cols[None, :], mask=(ks < k1)[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    if HAS_X2:
        for k0 in range(0, k2, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(x2 + rows[:, None] * k2 + ks[None, :], mask=row_ok[:, None] & (ks < k2)[None, :], other=0.0)
            b = tl.load(w2 + ks[:, None] * n + cols[None, :], mask=(ks < k2)[:, None] & col_ok[None, :], other=0.0)
            acc += tl.dot(a, b, input_precision="tf32x3")
    if HAS_BIAS:
        acc += tl.load(bias + cols, mask=col_ok, other=0.0)[None, :]
    if SILU:
        acc = _silu(acc)
    if ROW_DOT:
        v = tl.load(rowvec + cols, mask=col_ok, other=0.0)
        tl.store(out + rows, tl.sum(acc * v[None, :], axis=1), mask=row_ok)
    else:
        mask = row_ok[:, None] & col_ok[None, :]
        if HAS_RESID:
            acc += tl.load(resid + rows[:, None] * n + cols[None, :], mask=mask, other=0.0)
        tl.store(out + rows[:, None] * n + cols[None, :], acc, mask=mask)


@triton.jit
def _edge_first_kernel(src, dst, x, p_dst, p_src, w_dist, attr, w_attr, bias, rel_out, m_out,
                       n_edges, feat, fe, HAS_ATTR: tl.constexpr,
                       BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_A: tl.constexpr):
    """m1 = SiLU(P_a[i] + P_b[j] + |x_i - x_j|^2 w_d + a_ij @ W_c + b); also stores x_i - x_j."""
    es = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    e_ok = es < n_edges
    col_ok = cols < feat
    i = tl.load(dst + es, mask=e_ok, other=0)
    j = tl.load(src + es, mask=e_ok, other=0)
    dist2 = tl.zeros([BLOCK_E], dtype=tl.float32)
    for c in range(3):
        r = tl.load(x + i * 3 + c, mask=e_ok, other=0.0) - tl.load(x + j * 3 + c, mask=e_ok, other=0.0)
        dist2 += r * r
        if tl.program_id(1) == 0:
            tl.store(rel_out + es * 3 + c, r, mask=e_ok)
    mask = e_ok[:, None] & col_ok[None, :]
    pre = tl.load(p_dst + i[:, None] * feat + cols[None, :], mask=mask, other=0.0)
    pre += tl.load(p_src + j[:, None] * feat + cols[None, :], mask=mask, other=0.0)
    pre += dist2[:, None] * tl.load(w_dist + cols, mask=col_ok, other=0.0)[None, :]
    pre += tl.load(bias + cols, mask=col_ok, other=0.0)[None, :]
    if HAS_ATTR:
        ka = tl.arange(0, BLOCK_A)
        a = tl.load(attr + es[:, None] * fe + ka[None, :], mask=e_ok[:, None] & (ka < fe)[None, :], other=0.0)
        w = tl.load(w_attr + ka[:, None] * feat + cols[None, :], mask=(ka < fe)[:, None] & col_ok[None, :], other=0.0)
        pre += tl.dot(a, w, input_precision="tf32x3")
    tl.store(m_out + es[:, None] * feat + cols[None, :], _silu(pre), mask=mask)


@triton.jit
def _aggregate_kernel(rowptr, dst, m_edge, rel, s_edge, x, m_sum, x_out, n_nodes, feat,
                      BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    """Per block of destination nodes: m_sum = sum_j m_ij and x_out = x + mean_j (x_i - x_j) s_ij."""
    first = tl.program_id(0) * BLOCK_N
    nodes = first + tl.arange(0, BLOCK_N)
    node_ok = nodes < n_nodes
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    col_ok = cols < feat
    xyz = tl.arange(0, 16)  # 3 coordinates padded to a dot-product width
    start = tl.load(rowptr + first)
    end = tl.load(rowptr + tl.minimum(first + BLOCK_N, n_nodes))
    acc = tl.zeros([BLOCK_N, BLOCK_F], dtype=tl.float32)
    dx = tl.zeros([BLOCK_N, 16], dtype=tl.float32)
    for p0 in range(start, end, BLOCK_E):
        es = p0 + tl.arange(0, BLOCK_E)
        e_ok = es < end
        d = tl.load(dst + es, mask=e_ok, other=-1)
        onehot = tl.where(d[None, :] == nodes[:, None], 1.0, 0.0)
        tile = tl.load(m_edge + es[:, None] * feat + cols[None, :], mask=e_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(onehot, tile, input_precision="ieee")
        if tl.program_id(1) == 0:
            s = tl.load(s_edge + es, mask=e_ok, other=0.0)
            r = tl.load(rel + es[:, None] * 3 + xyz[None, :], mask=e_ok[:, None] & (xyz < 3)[None, :], other=0.0)
            dx += tl.dot(onehot, r * s[:, None], input_precision="ieee")
    tl.store(m_sum + nodes[:, None] * feat + cols[None, :], acc, mask=node_ok[:, None] & col_ok[None, :])
    if tl.program_id(1) == 0:
        deg = tl.load(rowptr + nodes + 1, mask=node_ok, other=1) - tl.load(rowptr + nodes, mask=node_ok, other=0)
        deg = tl.maximum(deg, 1).to(tl.float32)
        xmask = node_ok[:, None] & (xyz < 3)[None, :]
        old = tl.load(x + nodes[:, None] * 3 + xyz[None, :], mask=xmask, other=0.0)
        tl.store(x_out + nodes[:, None] * 3 + xyz[None, :], old + dx / deg[:, None], mask=xmask)


def _linear(x1, w1, bias=None, x2=None, w2=None, silu=False, resid=None, rowvec=None):
    m, k1 = x1.shape
    n = w1.shape[1]
    row_dot = rowvec is not None
    block_n = max(16, triton.next_power_of_2(n)) if row_dot else 64
    out = torch.empty((m,) if row_dot else (m, n), device=x1.device, dtype=torch.float32)
    dummy = x1
    grid = (triton.cdiv(m, 64), 1 if row_dot else triton.cdiv(n, block_n))
    _linear_kernel[grid](
        x1, w1, dummy if x2 is None else x2, dummy if w2 is None else w2, dummy if bias is None else bias,
        dummy if resid is None else resid, dummy if rowvec is None else rowvec, out,
        m, n, k1, 0 if x2 is None else x2.shape[1],
        HAS_X2=x2 is not None, HAS_BIAS=bias is not None, SILU=silu, HAS_RESID=resid is not None,
        ROW_DOT=row_dot, BLOCK_M=64, BLOCK_N=block_n, BLOCK_K=32)
    return out


class ModelNew(nn.Module):
    def __init__(self, **weights):
        super().__init__()
        for name in WEIGHT_NAMES:
            setattr(self, name, nn.Parameter(weights[name].contiguous()))

    def forward(self, h, x, edge_index, edge_attr):
        src, dst = edge_index[0].contiguous(), edge_index[1].contiguous()
        n, feat = h.shape
        n_edges, fe = edge_attr.shape
        edge_attr = edge_attr.contiguous()
        rowptr = torch.searchsorted(dst, torch.arange(n + 1, device=h.device, dtype=dst.dtype))
        h, x = h.contiguous(), x.contiguous()
        rel = torch.empty(n_edges, 3, device=h.device, dtype=torch.float32)
        m1 = torch.empty(n_edges, feat, device=h.device, dtype=torch.float32)
        m_sum = torch.empty(n, feat, device=h.device, dtype=torch.float32)
        block_f = min(64, max(16, triton.next_power_of_2(feat)))
        for layer in range(self.edge_w1.shape[0]):
            w1 = self.edge_w1[layer]
            p_dst = _linear(h, w1[:feat])
            p_src = _linear(h, w1[feat:2 * feat])
            _edge_first_kernel[(triton.cdiv(n_edges, 64), triton.cdiv(feat, block_f))](
                src, dst, x, p_dst, p_src, w1[2 * feat], edge_attr if fe else x, w1[2 * feat + 1:],
                self.edge_b1[layer], rel, m1, n_edges, feat, fe, HAS_ATTR=fe > 0,
                BLOCK_E=64, BLOCK_F=block_f, BLOCK_A=max(16, triton.next_power_of_2(max(fe, 1))))
            m = _linear(m1, self.edge_w2[layer], self.edge_b2[layer], silu=True)
            s = _linear(m, self.coord_w1[layer], self.coord_b1[layer], silu=True, rowvec=self.coord_w2[layer])
            x_new = torch.empty_like(x)
            _aggregate_kernel[(triton.cdiv(n, 16), triton.cdiv(feat, block_f))](
                rowptr, dst, m, rel, s, x, m_sum, x_new, n, feat, BLOCK_N=16, BLOCK_E=64, BLOCK_F=block_f)
            node_w1 = self.node_w1[layer]
            hidden = _linear(h, node_w1[:feat], self.node_b1[layer], x2=m_sum, w2=node_w1[feat:], silu=True)
            h = _linear(hidden, self.node_w2[layer], self.node_b2[layer], resid=h)
            x = x_new
        return h, x
