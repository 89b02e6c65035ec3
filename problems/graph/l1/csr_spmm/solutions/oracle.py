"""Oracle for graph/l1/csr_spmm: nonzero-balanced ("merge path") SpMM.

Every program takes the same number of nonzeros (CHUNK consecutive entries of col/val, whatever
rows they belong to) and one feature block: it gathers the CHUNK rows of X at once (every lane
useful even when most rows hold 1-3 nonzeros, as under the power law here), scales them by val
and sums them per row: a float64 prefix sum along the chunk, and at the last nonzero of each row
the difference with the prefix just before the row's first nonzero (tl.gather). A row that lies
wholly inside the chunk is stored; the first and the last row segment of a chunk may continue in
a neighbouring chunk and are added atomically into Y (zeroed first), so a hub row of 10^5
nonzeros is simply spread over many programs.

`ends` holds the row id at the last nonzero of every non-empty row (-1 elsewhere; one small
kernel); `chunk_row` the row at each chunk's first nonzero (a searchsorted over rowptr).
(The previous design, one program per row plus chunked hub rows, ran at 0.51x of cuSPARSE on the
H200: a 16-row gather tile for rows whose median length is about 3.)
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mark_row_ends(rowptr, ends, n, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = r < n
    begin = tl.load(rowptr + r, mask=ok, other=0)
    end = tl.load(rowptr + r + 1, mask=ok, other=0)
    tl.store(ends + end - 1, r, mask=ok & (end > begin))


@triton.jit
def _spmm_chunks(rowptr, ends, chunk_row, col, val, x, y, nnz, feat, n_chunks,
                 CHUNK: tl.constexpr, BLOCK_F: tl.constexpr):
    chunk = tl.program_id(0)
    k0 = chunk.to(tl.int64) * CHUNK
    fs = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_ok = fs < feat
    local = tl.arange(0, CHUNK)
    ps = k0 + local
    p_ok = ps < nnz

    c = tl.load(col + ps, mask=p_ok, other=0).to(tl.int64)
    v = tl.load(val + ps, mask=p_ok, other=0.0)
    xs = tl.load(x + c[:, None] * feat + fs[None, :], mask=p_ok[:, None] & f_ok[None, :], other=0.0)
    # float64 prefix sums along the chunk: a row's sum is a difference of two of them, exact to
    # far below the float32 tolerance whatever the magnitudes of the chunk's other rows
    prefix = tl.cumsum((v[:, None] * xs).to(tl.float64), 0)

    # segment ends: the last nonzero of a row, or the chunk's last nonzero (the row continues)
    row_end = tl.load(ends + ps, mask=p_ok, other=-1)
    last_in_chunk = (local == CHUNK - 1) | (ps == nnz - 1)
    next_row = tl.load(chunk_row + chunk + 1, mask=chunk + 1 < n_chunks, other=0)
    seg_end = p_ok & ((row_end >= 0) | last_in_chunk)
    rows = tl.where(row_end >= 0, row_end, next_row)
    first = tl.load(rowptr + rows, mask=seg_end, other=0).to(tl.int64)
    before = first - 1 - k0  # position of the previous row's end in the chunk (-1: before it)
    earlier = tl.gather(prefix, tl.broadcast_to(tl.maximum(before, 0)[:, None], [CHUNK, BLOCK_F]), 0)
    sums = (prefix - tl.where(before[:, None] >= 0, earlier, 0.0)).to(tl.float32)

    shared_row = (before < 0) | (row_end < 0)  # begins in an earlier chunk, or goes on in a later one
    out = y + rows.to(tl.int64)[:, None] * feat + fs[None, :]
    tl.store(out, sums, mask=(seg_end & ~shared_row)[:, None] & f_ok[None, :])
    tl.atomic_add(out, sums, mask=(seg_end & shared_row)[:, None] & f_ok[None, :])


def launch_tiles(feat: int, on_gpu: bool) -> dict:
    """CHUNK nonzeros x BLOCK_F features per program: on a GPU 16 KiB of gathers in flight per
    program (32 x 128 float32); the interpreter prefers few, wide programs."""
    block_f = min(128, triton.next_power_of_2(feat))
    if not on_gpu:
        return dict(CHUNK=1024, BLOCK_F=block_f)
    return dict(CHUNK=max(32, min(256, 4096 // block_f)), BLOCK_F=block_f, num_warps=4)


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, X):
        n, feat = X.shape
        nnz = col.numel()
        X = X.contiguous()
        y = torch.zeros(n, feat, device=X.device, dtype=X.dtype)
        if n == 0 or nnz == 0:
            return y
        ends = torch.full((nnz,), -1, device=X.device, dtype=torch.int32)
        _mark_row_ends[(triton.cdiv(n, 1024),)](rowptr, ends, n, BLOCK=1024)
        tiles = launch_tiles(feat, X.is_cuda)
        chunk_first = torch.arange(0, nnz, tiles["CHUNK"], device=X.device, dtype=rowptr.dtype)
        chunk_row = (torch.searchsorted(rowptr, chunk_first, right=True) - 1).to(torch.int32)
        n_chunks = chunk_first.numel()
        grid = (n_chunks, triton.cdiv(feat, tiles["BLOCK_F"]))
        _spmm_chunks[grid](rowptr, ends, chunk_row, col, val, X, y, nnz, feat, n_chunks, **tiles)
        return y
