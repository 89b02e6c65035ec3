"""Oracle for robotics/l1/aabb_broadphase_pairs: sort and sweep with a fused Triton candidate test.

Torch glue sorts the boxes by lo_x and finds each box's sweep range (searchsorted) and the
exclusive prefix sum of the range lengths. One Triton lane per candidate then finds its box
by binary search in that prefix sum (balanced even when a few huge boxes own thousands of
candidates), tests y and z, and writes the original-id pair (min, max) or -1, so the
reference's repeat_interleave expansion, gathers and chunking never materialise. Compaction
and the final lexicographic order are glue. Candidates are tested in chunks of
CANDIDATES_PER_LAUNCH: the x-sweep can yield n_boxes * 12000 candidates (1.2e10, 180 GiB as one
int64 pair buffer) although only millions of them overlap on y and z.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

CANDIDATES_PER_LAUNCH = 2 ** 26  # a 1 GiB int64 [chunk, 2] scratch per launch


@triton.jit
def _test_candidates(lo, hi, order, start, offset, out, first, end, n, n_steps, BLOCK: tl.constexpr):
    c = first + tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # global candidate index
    m = c < end
    # box i = the last index with offset[i] <= c (offset is non-decreasing, offset[0] = 0)
    left = tl.zeros([BLOCK], tl.int64)
    right = tl.zeros([BLOCK], tl.int64) + (n - 1)
    for _ in range(n_steps):
        mid = (left + right + 1) // 2
        go = tl.load(offset + mid, mask=m, other=0) <= c
        left = tl.where(go, mid, left)
        right = tl.where(go, right, mid - 1)
    i = left
    j = tl.load(start + i, mask=m, other=0) + (c - tl.load(offset + i, mask=m, other=0))
    ok = (tl.load(lo + i * 3 + 1, mask=m, other=0.0) <= tl.load(hi + j * 3 + 1, mask=m, other=0.0))
    ok = ok & (tl.load(lo + j * 3 + 1, mask=m, other=0.0) <= tl.load(hi + i * 3 + 1, mask=m, other=0.0))
    ok = ok & (tl.load(lo + i * 3 + 2, mask=m, other=0.0) <= tl.load(hi + j * 3 + 2, mask=m, other=0.0))
    ok = ok & (tl.load(lo + j * 3 + 2, mask=m, other=0.0) <= tl.load(hi + i * 3 + 2, mask=m, other=0.0))
    oi = tl.load(order + i, mask=m, other=0)
    oj = tl.load(order + j, mask=m, other=0)
    slot = c - first
    tl.store(out + slot * 2, tl.where(ok, tl.minimum(oi, oj), -1), mask=m)
    tl.store(out + slot * 2 + 1, tl.where(ok, tl.maximum(oi, oj), -1), mask=m)


class ModelNew(nn.Module):
    def forward(self, lo, hi):
        n = lo.shape[0]
        order = torch.argsort(lo[:, 0], stable=True)
        lo_s, hi_s = lo[order].contiguous(), hi[order].contiguous()
        end = torch.searchsorted(lo_s[:, 0].contiguous(), hi_s[:, 0].contiguous(), right=True)
        start = torch.arange(1, n + 1, device=lo.device)
        count = (end - start).clamp(min=0)
        offset = torch.cumsum(count, 0) - count
        total = int(count.sum())
        BLOCK = 1024 if lo.is_cuda else 65536
        found = []
        for first in range(0, total, CANDIDATES_PER_LAUNCH):
            end = min(total, first + CANDIDATES_PER_LAUNCH)
            out = torch.empty(end - first, 2, dtype=torch.int64, device=lo.device)
            _test_candidates[(triton.cdiv(end - first, BLOCK),)](lo_s, hi_s, order, start, offset, out, first, end,
                                                                 n, max(1, (n - 1).bit_length()), BLOCK=BLOCK)
            found.append(out[out[:, 0] >= 0])
        pairs = torch.cat(found) if found else torch.empty(0, 2, dtype=torch.int64, device=lo.device)
        return pairs[torch.argsort(pairs[:, 0] * n + pairs[:, 1])]
