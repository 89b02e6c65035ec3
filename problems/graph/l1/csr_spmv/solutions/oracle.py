"""Oracle for graph/l1/csr_spmv: no nnz-sized temporary, load-balanced over power-law rows.

Short rows (<= LONG nonzeros): BLOCK_R rows per program as a [BLOCK_R, BLOCK_K] tile,
so a warp works on many rows at once instead of idling on a row of 16. Long rows (the
hubs of the power law): split into CHUNK-sized pieces, one program each, whose partial
sums are added atomically, so one hub row cannot serialise the whole kernel.

No call waits for the GPU: the hub pieces' work list is sized from nnz (known on the host),
not from the rows found long, so nothing is read back mid-call. The earlier version read
sizes back four times a call (torch.nonzero, repeat_interleave), and its time followed the
host's load: 0.77-1.19 ms in the Popcorn2 passes.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

LONG = 256
CHUNK = 2048


@triton.jit
def _short_rows(rowptr, col, val, x, y, n, LONG: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    in_range = rows < n
    start = tl.load(rowptr + rows, mask=in_range, other=0)
    end = tl.load(rowptr + rows + 1, mask=in_range, other=0)
    length = end - start
    short = length <= LONG
    end = tl.where(short, end, start)  # long rows are summed by _long_rows
    span = tl.max(end - start, axis=0)
    acc = tl.zeros([BLOCK_R, BLOCK_K], dtype=tl.float32)
    for k in range(0, span, BLOCK_K):
        offs = start[:, None] + k + tl.arange(0, BLOCK_K)[None, :]
        m = offs < end[:, None]
        c = tl.load(col + offs, mask=m, other=0)
        v = tl.load(val + offs, mask=m, other=0.0)
        acc += v * tl.load(x + c, mask=m, other=0.0)
    tl.store(y + rows, tl.sum(acc, axis=1), mask=in_range)


@triton.jit
def _long_rows(rowptr, col, val, x, y, work_row, work_start, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    w = tl.program_id(0)
    row = tl.load(work_row + w)
    if row >= 0:  # the list is sized for the most pieces nnz allows; its unused tail is -1
        begin = tl.load(work_start + w)
        end = tl.minimum(tl.load(rowptr + row + 1), begin + CHUNK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for p in range(begin, end, BLOCK):
            offs = p + tl.arange(0, BLOCK)
            m = offs < end
            c = tl.load(col + offs, mask=m, other=0)
            v = tl.load(val + offs, mask=m, other=0.0)
            acc += v * tl.load(x + c, mask=m, other=0.0)
        tl.atomic_add(y + row, tl.sum(acc, axis=0))


def _hub_pieces(rowptr, nnz):
    """(row, first nonzero) of each CHUNK-sized piece of each long row, made on the device.
    A long row has more than LONG nonzeros and ceil(len / CHUNK) pieces, so there are at most
    nnz // CHUNK + nnz // (LONG + 1) pieces in all; the list's unused tail has row -1."""
    n = rowptr.numel() - 1
    lengths = rowptr[1:] - rowptr[:-1]
    pieces = torch.where(lengths > LONG, (lengths + CHUNK - 1) // CHUNK, 0)
    ends = torch.cumsum(pieces, 0)
    work = torch.arange(nnz // CHUNK + nnz // (LONG + 1) + 1, device=rowptr.device)
    row = torch.searchsorted(ends, work, right=True).clamp_(max=n - 1)
    start = rowptr[row].long() + (work - ends[row] + pieces[row]) * CHUNK
    row = torch.where(work < ends[-1], row, -1)
    return row.to(torch.int32), start.to(torch.int32)


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        n = rowptr.numel() - 1
        y = torch.empty(n, device=x.device, dtype=x.dtype)
        if n == 0:
            return y
        block_r = 64
        # writes every row, 0 for the long ones, whose pieces then add into it
        _short_rows[(triton.cdiv(n, block_r),)](rowptr, col, val, x, y, n, LONG=LONG, BLOCK_R=block_r, BLOCK_K=16)
        work_row, work_start = _hub_pieces(rowptr, col.numel())
        _long_rows[(work_row.numel(),)](rowptr, col, val, x, y, work_row, work_start, CHUNK=CHUNK, BLOCK=256)
        return y
