"""Oracle for graph/l1/csr_spmm: nonzero-balanced SpMM with a segmented scan (no fp64, atomics
only for hub rows).

Work split (merge-path style, as in GE-SpMM / Sputnik-like nnz balancing): program k takes the
nonzeros [bounds[k], bounds[k+1]), where bounds[k] is k * PROGRAM_NNZ moved back to the start of
its row, unless that row is a hub (more than PROGRAM_NNZ nonzeros). So a light row (the median
holds ~3 nonzeros) always lies in one program and is written with a plain store; only hub rows
are split, and their pieces are added atomically into rows zeroed beforehand.

Inside a program, a loop over tiles of BLOCK_NNZ nonzeros: the (col, val) of the tile loaded at
once, a [BLOCK_NNZ, BLOCK_F] gather of X rows (BLOCK_NNZ independent 4*BLOCK_F-byte row loads in
flight), and a segmented inclusive scan along the tile keyed by row: at the last nonzero of every
row segment the scan holds that segment's exact float32 sum. The segment still open at the end
of a tile is carried into the next one.

Per-nonzero row keys come from `start_key`: 2*row + is_hub at the first nonzero of every
non-empty row, -1 elsewhere; a running max along the tile turns them into every nonzero's key.
One `_prepare` launch writes the row-start keys, zeroes empty and hub rows of Y, and finds the
program bounds (a vectorised binary search over rowptr). Tile sizes are autotuned on the GPU
(untimed first call per (feat, nnz/row) class); the output never depends on the tuning.

Model at the default shape (15.25M nonzeros, median row 3, 2266 hub rows holding 42% of them,
feat 128; not measured): DRAM ~ 7.0-7.8 GB of X row gathers (7.81 GB requested, X 512 MB against a
50 MB L2) + 0.51 GB Y + 0.24 GB col/val/start keys + 0.1 GB preparation = 7.9-8.7 GB, i.e. 2.0-2.5 ms
at 3.5-4.0 TB/s (cuSPARSE: 2.78 ms, ~2.8-3 TB/s on the same bytes). Issue: ~80 SASS warp
instructions per nonzero in the leanest config (1 warp, BLOCK_NNZ 8) = 1.2 G, about 1.2 ms of the
H200's issue slots, which must overlap the memory time for the win.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _restart_combine(keep_a, sum_a, keep_b, sum_b):
    # s[p] = keep[p] * s[p-1] + term[p], keep = 0 where a row starts: composing a then b. keep is
    # 0 or 1, so the sums are exact float32 sums of each row's terms (fma(1, a, b) rounds as a + b)
    return keep_a * keep_b, keep_b * sum_a + sum_b


@triton.jit
def _prepare(rowptr, start_key, bounds, first_key, y, n, nnz, feat, n_programs, n_row_blocks, search_steps,
             PROGRAM_NNZ: tl.constexpr, ROWS: tl.constexpr, BLOCK_F: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, ROWS)
    if pid < n_row_blocks:
        r = pid * ROWS + lanes
        ok = r < n
        rs = tl.load(rowptr + r, mask=ok, other=0)
        re = tl.load(rowptr + r + 1, mask=ok, other=0)
        hub = (re - rs) > PROGRAM_NNZ
        tl.store(start_key + rs, 2 * r + hub.to(tl.int32), mask=ok & (re > rs))
        # the main kernel never stores empty rows, and adds hub rows piece by piece: zero them
        zero_rows = ok & ((re == rs) | hub)
        zeros = tl.zeros([ROWS, BLOCK_F], dtype=tl.float32)
        for f0 in range(0, feat, BLOCK_F):
            fs = f0 + tl.arange(0, BLOCK_F)
            tl.store(y + r[:, None] * feat + fs[None, :], zeros, mask=zero_rows[:, None] & (fs < feat)[None, :])
    else:
        k = (pid - n_row_blocks) * ROWS + lanes
        ok = k <= n_programs
        pos = tl.minimum(k * PROGRAM_NNZ, nnz)
        # the row holding nonzero pos: the last r with rowptr[r] <= pos (rowptr[0] = 0 <= pos < rowptr[n])
        lo = tl.zeros([ROWS], dtype=tl.int32)
        hi = tl.zeros([ROWS], dtype=tl.int32) + n
        for _ in range(search_steps):
            mid = (lo + hi) // 2
            below = tl.load(rowptr + mid, mask=ok, other=0) <= pos
            lo = tl.where(below, mid, lo)
            hi = tl.where(below, hi, mid)
        rs = tl.load(rowptr + lo, mask=ok, other=0)
        re = tl.load(rowptr + lo + 1, mask=ok, other=0)
        hub = (re - rs) > PROGRAM_NNZ
        bound = tl.where(k == n_programs, nnz, tl.where(hub, pos, rs))
        tl.store(bounds + k, bound, mask=ok)
        tl.store(first_key + k, 2 * lo + hub.to(tl.int32), mask=ok)


@triton.jit
def _load_tile_indices(col, val, start_key, ps, end):
    ok = ps < end
    c = tl.load(col + ps, mask=ok, other=0)
    v = tl.load(val + ps, mask=ok, other=0.0)
    key_here = tl.load(start_key + ps, mask=ok, other=-1)
    next_starts = tl.load(start_key + ps + 1, mask=ps + 1 < end, other=-1) >= 0
    return c, v, key_here, next_starts


@triton.jit
def _gather_rows(x, c, ps, end, feat, fs, f_ok, EVEN_F: tl.constexpr):
    # n_rows * feat <= 2**28: int32 offsets. Positions past the end hold column 0 (a valid row, the
    # same one: cache hits) and value 0, and no result before them depends on them: no row mask
    if EVEN_F:
        rows = tl.load(x + c[:, None] * feat + fs[None, :])
    else:
        rows = tl.load(x + c[:, None] * feat + fs[None, :], mask=f_ok[None, :], other=0.0)
    return rows


@triton.jit
def _spmm_segments(bounds, first_key, start_key, col, val, x, y, feat, n_feature_blocks, row_len_class,
                   BLOCK_NNZ: tl.constexpr, BLOCK_F: tl.constexpr, EVEN_F: tl.constexpr,
                   SEGMENTED_SCAN: tl.constexpr):
    # row_len_class only keys the autotuning cache
    pid = tl.program_id(0)
    prog = pid // n_feature_blocks
    fs = (pid % n_feature_blocks) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_ok = fs < feat
    begin = tl.load(bounds + prog)
    end = tl.load(bounds + prog + 1)
    carry_key = tl.load(first_key + prog)
    carry = tl.zeros([BLOCK_F], dtype=tl.float32)
    local = tl.arange(0, BLOCK_NNZ)
    # software pipeline, written out (the compiler's pipeliner leaves this loop alone): while tile t
    # is reduced, the X rows of tile t+1 and the indices of tile t+2 are already in flight
    ps = begin + local
    c, v, key_here, next_starts = _load_tile_indices(col, val, start_key, ps, end)
    xs = _gather_rows(x, c, ps, end, feat, fs, f_ok, EVEN_F)
    c1, v1, key_here1, next_starts1 = _load_tile_indices(col, val, start_key, ps + BLOCK_NNZ, end)
    for p0 in range(begin, end, BLOCK_NNZ):
        xs1 = _gather_rows(x, c1, ps + BLOCK_NNZ, end, feat, fs, f_ok, EVEN_F)
        c2, v2, key_here2, next_starts2 = _load_tile_indices(col, val, start_key, ps + 2 * BLOCK_NNZ, end)

        ok = ps < end
        terms = v[:, None] * xs
        starts = key_here >= 0
        keys = tl.associative_scan(tl.maximum(key_here, carry_key), 0, _max_combine)
        if SEGMENTED_SCAN:  # exact float32 sums of every row segment, ending at its last nonzero
            keep = tl.broadcast_to((~starts).to(tl.float32)[:, None], (BLOCK_NNZ, BLOCK_F))
            in_carried_row, sums = tl.associative_scan((keep, terms), 0, _restart_combine)
        else:  # the same through float64 prefix differences: the interpreter runs only cumsum fast
            prefix = tl.cumsum(terms.to(tl.float64), 0)
            before = tl.associative_scan(tl.where(starts, local, 0), 0, _max_combine) - 1
            earlier = tl.gather(prefix, tl.broadcast_to(tl.maximum(before, 0)[:, None], (BLOCK_NNZ, BLOCK_F)), 0)
            sums = (prefix - tl.where(before[:, None] >= 0, earlier, 0.0)).to(tl.float32)
            in_carried_row = (tl.cumsum(starts.to(tl.int32), 0) == 0).to(tl.float32)[:, None]
        # the row left open by the previous tile continues until the tile's first row start
        sums += in_carried_row * carry[None, :]
        segment_end = ok & (next_starts | (ps + 1 >= end))
        hub = (keys & 1) == 1
        out = y + (keys >> 1)[:, None] * feat + fs[None, :]
        if EVEN_F:
            tl.store(out, sums, mask=(segment_end & ~hub)[:, None])
            tl.atomic_add(out, sums, mask=(segment_end & hub)[:, None], sem="relaxed")
        else:
            tl.store(out, sums, mask=(segment_end & ~hub)[:, None] & f_ok[None, :])
            tl.atomic_add(out, sums, mask=(segment_end & hub)[:, None] & f_ok[None, :], sem="relaxed")
        last = local == tl.minimum(end - p0, BLOCK_NNZ) - 1
        carry = tl.sum(sums * (last & ~segment_end).to(tl.float32)[:, None], 0)
        carry_key = tl.max(tl.where(last, keys, -1), 0)

        ps = ps + BLOCK_NNZ
        v, key_here, next_starts, xs = v1, key_here1, next_starts1, xs1
        c1, v1, key_here1, next_starts1 = c2, v2, key_here2, next_starts2


def launch_tiles(feat: int, on_gpu: bool) -> dict:
    """CHUNK: nonzeros per program (PROGRAM_NNZ; longer rows are hubs, split across programs);
    BLOCK_F: features per program. The interpreter prefers few, wide programs."""
    block_f = min(128, triton.next_power_of_2(feat))
    return dict(CHUNK=512 if on_gpu else 1024, BLOCK_F=block_f)


def _bench_or_compile(kernel_call, quantiles):
    """Autotuning's timer on a GPU; without one (sm90_dry_launch) every config is only compiled.
    A config's time is its fastest sample, not the median: the first call may share the GPU with
    other work (a pass runs other judges' trials beside it), which slows whichever config it
    overlaps. In the 22nd session's H100 pass a median-tuned oracle timed 0.88x where the 18th's
    got 1.13x. The autotuner compares the quantile lists, so every entry holds the minimum."""
    if not torch.cuda.is_available():
        kernel_call()
        return [0.0] * len(quantiles)
    fastest = triton.testing.do_bench(kernel_call, return_mode="min")
    return [fastest] * len(quantiles)


def _configs(block_f: int) -> list:
    """Gather tiles of 1K-8K floats (4-32 KiB of X rows per tile, two tiles in flight per
    program) on one warp, keeping 8-64 tile elements per thread (ptxas, sm_90, feat 128:
    BLOCK_NNZ 8 takes 178 registers and ~80 SASS warp instructions per nonzero, the fewest of the
    configs that do not spill; 16 spills ~180 bytes but spreads the per-tile index work over
    twice the nonzeros). One warp only: on the H200 (csr_spmm_probe.py, fifth session) a
    one-warp config was fastest at all four shapes probed, and the 2-8 warp ones were 1.4-6x
    slower; fewer configs also leave the tuning fewer wrong picks. num_stages is left out: the
    compiler's pipeliner does not pipeline this loop (the kernel prefetches by hand)."""
    sizes = sorted({max(8, min(512, tile // block_f)) for tile in (1024, 2048, 4096, 8192)})
    return [triton.Config({"BLOCK_NNZ": block_nnz}, num_warps=1, num_stages=1)
            for block_nnz in sizes if 8 <= block_nnz * block_f // 32 <= 64]


# The GPU sums row segments with a segmented scan (tl.associative_scan); the interpreter runs a
# custom scan element by element (~30 s per forward at the CPU default shape), so it takes float64
# prefix differences instead. Tests set this to True to run the GPU's path on small inputs.
INTERPRETER_SEGMENTED_SCAN = False

_tuned_kernels: dict = {}
_tuned_keys: set = set()


def _tuned_kernel(block_f: int):
    if block_f not in _tuned_kernels:
        _tuned_kernels[block_f] = triton.autotune(_configs(block_f), key=["feat", "row_len_class"],
                                                  do_bench=_bench_or_compile)(_spmm_segments)
    return _tuned_kernels[block_f]


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, X):
        n, feat = X.shape
        nnz = col.numel()
        X = X.contiguous()
        y = torch.empty(n, feat, device=X.device, dtype=X.dtype)
        if n == 0:
            return y
        if nnz == 0:
            return y.zero_()
        on_gpu = X.is_cuda
        tiles = launch_tiles(feat, on_gpu)
        program_nnz, block_f = tiles["CHUNK"], tiles["BLOCK_F"]
        n_programs = triton.cdiv(nnz, program_nnz)
        n_feature_blocks = triton.cdiv(feat, block_f)
        even_f = feat % block_f == 0
        row_len_class = (nnz // n).bit_length()
        start_key = torch.full((nnz,), -1, device=X.device, dtype=torch.int32)
        bounds = torch.empty(n_programs + 1, device=X.device, dtype=torch.int32)
        first_key = torch.empty(n_programs + 1, device=X.device, dtype=torch.int32)
        rows_per_block = 64
        n_row_blocks = triton.cdiv(n, rows_per_block)
        prepare_grid = (n_row_blocks + triton.cdiv(n_programs + 1, rows_per_block),)

        def prepare():
            _prepare[prepare_grid](rowptr, start_key, bounds, first_key, y, n, nnz, feat, n_programs, n_row_blocks,
                                   n.bit_length(), PROGRAM_NNZ=program_nnz, ROWS=rows_per_block, BLOCK_F=block_f)

        args = (bounds, first_key, start_key, col, val, X, y, feat, n_feature_blocks, row_len_class)
        grid = (n_programs * n_feature_blocks,)
        prepare()
        if not on_gpu:
            _spmm_segments[grid](*args, BLOCK_NNZ=max(2, program_nnz // 4), BLOCK_F=block_f, EVEN_F=even_f,
                                 SEGMENTED_SCAN=INTERPRETER_SEGMENTED_SCAN)
            return y
        kernel = _tuned_kernel(block_f)
        kernel[grid](*args, BLOCK_F=block_f, EVEN_F=even_f, SEGMENTED_SCAN=True)
        tuning_key = (block_f, feat, row_len_class, X.dtype)
        if tuning_key not in _tuned_keys:
            # autotuning ran every config on y (hub rows added up many times): compute it afresh
            _tuned_keys.add(tuning_key)
            prepare()
            kernel[grid](*args, BLOCK_F=block_f, EVEN_F=even_f, SEGMENTED_SCAN=True)
        return y
