"""Oracle for graph/l2/gcn_layer: a Triton GEMM for H @ W, then one program per destination node that
gathers its neighbours' rows with the symmetric normalization, adds the self-loop term, bias and relu."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a, b, c, m, n, k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        at = tl.load(a + rows[:, None].to(tl.int64) * k + ks[None, :], mask=(rows < m)[:, None] & (ks < k)[None, :],
                     other=0.0)
        bt = tl.load(b + ks[:, None] * n + cols[None, :], mask=(ks < k)[:, None] & (cols < n)[None, :], other=0.0)
        acc += tl.dot(at, bt, input_precision="tf32x3")
    tl.store(c + rows[:, None].to(tl.int64) * n + cols[None, :], acc, mask=(rows < m)[:, None] & (cols < n)[None, :])


@triton.jit
def _aggregate_kernel(rowptr, src, xw, bias, out, f_out, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    node = tl.program_id(0)
    fs = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_ok = fs < f_out
    start = tl.load(rowptr + node)
    end = tl.load(rowptr + node + 1)
    deg_i = (end - start + 1).to(tl.float32)
    acc = tl.load(xw + node.to(tl.int64) * f_out + fs, mask=f_ok, other=0.0) / deg_i
    for p0 in range(start, end, BLOCK_E):
        ps = p0 + tl.arange(0, BLOCK_E)
        p_ok = ps < end
        j = tl.load(src + ps, mask=p_ok, other=0)
        deg_j = (tl.load(rowptr + j + 1, mask=p_ok, other=1) - tl.load(rowptr + j, mask=p_ok, other=0) + 1)
        norm = 1.0 / tl.sqrt(deg_j.to(tl.float32) * deg_i)
        rows = tl.load(xw + j[:, None] * f_out + fs[None, :], mask=p_ok[:, None] & f_ok[None, :], other=0.0)
        acc += tl.sum(rows * norm[:, None], axis=0)
    acc += tl.load(bias + fs, mask=f_ok, other=0.0)
    tl.store(out + node.to(tl.int64) * f_out + fs, tl.maximum(acc, 0.0), mask=f_ok)


class ModelNew(nn.Module):
    def forward(self, edge_index, H, W, b):
        n, f_in = H.shape
        f_out = W.shape[1]
        src, dst = edge_index[0].contiguous(), edge_index[1].contiguous()
        xw = torch.empty(n, f_out, device=H.device, dtype=torch.float32)
        _gemm_kernel[(triton.cdiv(n, 64), triton.cdiv(f_out, 64))](H.contiguous(), W.contiguous(), xw, n, f_out, f_in,
                                                                  BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        # in-degree of the dst-sorted edge list as CSR row pointers (the graph is symmetric: deg = in-degree)
        rowptr = torch.searchsorted(dst, torch.arange(n + 1, device=H.device, dtype=dst.dtype))
        out = torch.empty(n, f_out, device=H.device, dtype=H.dtype)
        block_f = min(128, triton.next_power_of_2(f_out))
        _aggregate_kernel[(n, triton.cdiv(f_out, block_f))](rowptr, src, xw, b.contiguous(), out, f_out,
                                                            BLOCK_E=16, BLOCK_F=block_f)
        return out
