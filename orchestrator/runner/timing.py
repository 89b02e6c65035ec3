"""Timing loops shared by the judge (reference) and the candidate's process.

GPU: CUDA events around a region closed by a device-wide synchronize (work left on
side streams is counted), several calls back to back in one region when a call is short
(the region's own cost is paid once), L2 flushed before every region, the GPU kept busy
for a fixed lead while the host launches the region's first call, warm-up excluded,
the allocator primed so timed regions allocate nothing,
inputs rotated over distinct sets and re-allocated every iteration (new addresses,
so output caching by pointer cannot pay off), the host clock read around the same
region as a cross-check. CPU: the host clock, labelled `cpu_wall`.

The functions this module calls are bound at import, before any candidate code
is imported, so replacing torch.cuda.Event or time.perf_counter later does not
change what is measured; `TimerGuard` reports such replacements.
"""
from __future__ import annotations

import functools
import math
import random
import statistics
import time
from typing import Any, Callable, Sequence

import torch

_perf_counter_ns = time.perf_counter_ns
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize
_cuda_sync = torch.cuda.synchronize
_gpu_sleep = torch.cuda._sleep

WATCHED: dict[str, Callable[[], Any]] = {
    "time.perf_counter_ns": lambda: time.perf_counter_ns,
    "time.perf_counter": lambda: time.perf_counter,
    "torch.cuda.Event": lambda: torch.cuda.Event,
    "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
    "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
    "torch.cuda.Event.synchronize": lambda: torch.cuda.Event.synchronize,
    "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
    "torch.cuda._sleep": lambda: torch.cuda._sleep,
}


class TimerGuard:
    """Remembers the timer functions at creation; `tampered()` names the ones replaced."""

    def __init__(self) -> None:
        self._original = {name: get() for name, get in WATCHED.items()}

    def tampered(self) -> list[str]:
        return [name for name, get in WATCHED.items() if get() is not self._original[name]]


def stats(times_ms: Sequence[float], device_allocs: int | None = None,
          floor_ms: Sequence[float] = (), calls_per_region: Sequence[int] = (),
          round_sizes: Sequence[int] = ()) -> dict[str, Any]:
    """Summary of timed iterations, with every sample in the order it was taken (rounds
    of an interleaved measurement follow each other), so a published record can be
    re-analysed: a bimodal distribution, a slow first round, drift."""
    xs = sorted(times_ms)
    n = len(xs)
    q1, q3 = xs[n // 4], xs[(3 * n) // 4] if n > 1 else xs[0]
    mean = statistics.fmean(xs)
    cv = statistics.pstdev(xs) / mean if n > 1 and mean > 0 else 0.0
    out = {"median_ms": statistics.median(xs), "mean_ms": mean, "min_ms": xs[0], "max_ms": xs[-1],
           "iqr_ms": q3 - q1, "cv": cv, "n": n, "samples_ms": [round(x, 6) for x in times_ms]}
    if device_allocs is not None:
        out["device_allocs"] = device_allocs
    if floor_ms:
        out["floor_ms"] = statistics.median(floor_ms)
    if calls_per_region:
        out["calls_per_region"] = list(calls_per_region)
    if round_sizes:
        out["round_sizes"] = list(round_sizes)
    return out


def speedup_ci(ref_rounds: Sequence[Sequence[float]], cand_rounds: Sequence[Sequence[float]],
               resamples: int = 2000, seed: int = 0, ref_processes: Sequence[int] | None = None,
               cand_processes: Sequence[int] | None = None) -> tuple[float, float]:
    """95 % bootstrap interval of median(ref) / median(candidate), resampling rounds first and
    samples within the drawn rounds second (a two-level bootstrap).

    Samples of one round are not independent: short kernels' round medians jumped between
    about 0.065 and 0.10 ms on the H200 (host state, not the kernel), so a bootstrap over
    pooled samples put one library at 0.82x-0.88x against itself with intervals excluding
    1.0 (2026-11-30). Rounds taken at the same point of the ABBA order are drawn together
    when both sides have as many, so drift shared by the pair cancels.

    With `*_processes` (the process each round ran in, see `Replicas`) the processes are
    drawn first, then rounds within each drawn process: a process has its own level, which its
    rounds share (three levels)."""
    ref = [(list(r), g) for r, g in zip(ref_rounds, ref_processes or range(len(ref_rounds))) if len(r)]
    cand = [(list(c), g) for c, g in zip(cand_rounds, cand_processes or range(len(cand_rounds))) if len(c)]
    ref_rounds, cand_rounds = [r for r, _ in ref], [c for c, _ in cand]
    ref_groups, cand_groups = _groups([g for _, g in ref]), _groups([g for _, g in cand])
    rng = random.Random(seed)
    paired = ref_processes is None and cand_processes is None and len(ref_rounds) == len(cand_rounds)
    ratios = []
    for _ in range(resamples):
        ref_pick = _drawn(ref_groups, rng)
        cand_pick = ref_pick if paired else _drawn(cand_groups, rng)
        r = statistics.median(_resampled(ref_rounds, ref_pick, rng))
        c = statistics.median(_resampled(cand_rounds, cand_pick, rng))
        ratios.append(r / c if c > 0 else math.inf)
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def _groups(labels: Sequence[Any]) -> list[list[int]]:
    """Round indices grouped by label, in order of first appearance."""
    groups: dict[Any, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    return list(groups.values())


def _drawn(groups: list[list[int]], rng: random.Random) -> list[int]:
    """As many groups as there are, with replacement, then as many rounds as each drawn group
    has, from it, with replacement. One round per group: the rounds drawn with replacement."""
    return [rng.choice(g) for g in (rng.choice(groups) for _ in groups) for _ in g]


def _resampled(rounds: list[list[float]], picks: list[int], rng: random.Random) -> list[float]:
    return [x for i in picks for x in rng.choices(rounds[i], k=len(rounds[i]))]


def replica_sides(candidate: Any, start: Callable[[str], Any], processes: Any, sets: Any) -> dict[str, "Replicas"]:
    """A translation timing's two sides: the candidate's process given plus `processes - 1` more,
    and `processes` of the H100 reference; `start(name)` starts one ("candidate" or "h100").
    Candidate and reference alternate in rounds, so drift over the measurement hits both alike;
    each side's rounds take its processes in turn."""
    n = max(1, int(processes))
    return {"candidate": Replicas([candidate] + [start("candidate") for _ in range(n - 1)], sets),
            "reference": Replicas([start("h100") for _ in range(n)], sets)}


class Replicas:
    """The processes one implementation is timed in, taken in turn, one per round. Two
    processes of the same library can sit at levels apart while each one's rounds agree:
    gptq's and ag-gemm's H100 references scored 1.008 and 0.980 against themselves on the H200,
    with intervals of +-0.3 % (ninth session), so an interval from one process per side claims
    a precision the comparison does not have. `rounds` records the process of each round,
    for `speedup_ci`."""

    def __init__(self, workers: Sequence[Any], sets: Any):
        self.workers = list(workers)
        self._payloads = [ships_once(sets) for _ in self.workers]  # each process gets the sets once
        self.rounds: list[int] = []

    def take(self) -> tuple[Any, Callable[[], dict[str, Any]], bool]:
        """The next round's worker, its input-set payload, and whether it was not used yet
        (a fresh process gets the full warm-up)."""
        i = len(self.rounds) % len(self.workers)
        fresh = i not in self.rounds
        self.rounds.append(i)
        return self.workers[i], self._payloads[i], fresh

    def timer(self, time_one: Callable[[Any, Callable[[], dict[str, Any]], int, int], Any],
              warmup: int) -> Callable[[int, int], Any]:
        """`interleaved()`'s timer for this side: `time_one(worker, payload, n, warmup)` on the
        next process each round, with the full `warmup` in a process's first round."""
        def run(n: int, w: int) -> Any:
            worker, payload, fresh = self.take()
            return time_one(worker, payload, n, warmup if fresh else w)
        return run

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


def fingerprint(out: Any) -> list[tuple[float, float]]:
    """Cheap per-output checksum (sum, sum of |x|) to verify timed outputs."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    fp = []
    for o in outs:
        if not isinstance(o, torch.Tensor):
            fp.append((math.nan, math.nan))
            continue
        d = o.detach().double()
        fp.append((float(torch.nan_to_num(d, nan=1e300).sum()), float(torch.nan_to_num(d.abs(), nan=1e300).sum())))
    return fp


def fingerprint_rel(tolerance: dict[str, Any], own_checker: bool = False) -> float:
    """How far a timed output's checksums may drift from the reference's: never tighter
    than the problem's own rtol (TF32 or bf16 kernels within tolerance move sums by about
    that much), never looser than 1e-2. Problems with their own `check_output` accept
    answers that are not unique (ties, residual-judged solvers): the loosest bound, unless
    the manifest states its own `fingerprint_rel` (lddt_score's checker allows rounding flips
    that move its sums by a few millionths)."""
    if tolerance.get("fingerprint_rel") is not None:  # the problem knows its answers' spread best
        return float(tolerance["fingerprint_rel"])
    if own_checker:
        return 1e-2
    return min(max(1e-3, float(tolerance.get("rtol", 0.0) or 0.0)), 1e-2)


def fingerprints_agree(a: list[tuple[float, float]], b: list[tuple[float, float]], rel: float = 1e-3) -> bool:
    if len(a) != len(b):
        return False
    for (sa, aa), (sb, ab) in zip(a, b):
        scale = max(abs(ab), 1e-30)
        if not (abs(sa - sb) <= rel * scale + 1e-6 and abs(aa - ab) <= rel * scale + 1e-6):
            return False
    return True


def ships_once(sets: Any) -> Callable[[], dict[str, Any]]:
    """The input-set part of a worker's timing requests: the first request carries the sets,
    later rounds reuse the worker's copy. Pickled anew every round, cute-hgemm's inputs made
    its timing stage 102 s for 0.4 ms kernels once the time budget asked for 20 rounds."""
    sent = False

    def payload() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {}
        sent = True
        return {"input_sets": sets}

    return payload


def cached_sets(cache: dict[str, Any], msg: dict[str, Any], load: Callable[[Any], Any]) -> Any:
    """The worker's side of ships_once: `load(msg["input_sets"])` when a request carries sets,
    else what the last one loaded."""
    if "input_sets" in msg:
        cache["sets"] = load(msg["input_sets"])
    if "sets" not in cache:
        raise ValueError("a timing request without input sets, and none from an earlier round")
    return cache["sets"]


def _nbytes(inputs: Sequence[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))


def _fresh_copy(inputs: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)


LEAD_MS = 0.2  # GPU busy time ahead of a region's start event; see L2Flusher.lead


class L2Flusher:
    """What a region needs before its start event: the L2 flushed, and a lead."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        size = max(int(getattr(props, "L2_cache_size", 50 << 20)) * 2, 64 << 20)
        self.buf = torch.empty(size // 4, dtype=torch.int32, device=device)
        self.lead_cycles = _cycles_for(LEAD_MS, torch.device(device).index)

    def __call__(self) -> None:
        self.buf.zero_()

    def lead(self) -> None:
        """Keep the GPU busy for LEAD_MS ahead of the start event, so the host launches the
        region's first call while the GPU is still busy and the launch path stays out of the
        time, as it does for every later call of a region, and in an application. Recorded on
        an idle GPU, a smith_waterman region's time held its first launch (0.06-0.14 ms, in
        states of 1-4 s): its samples sat at two levels 1.2 % apart, the kernel behind another
        call at one (ninth session, H200). Host work in a call beyond the lead is still paid."""
        _gpu_sleep(self.lead_cycles)


@functools.lru_cache(maxsize=None)
def _cycles_for(ms: float, device_index: int | None) -> int:
    """Clock cycles torch.cuda._sleep spins for `ms` on the current device, measured once per
    process and device (every round makes a flusher)."""
    probe = 1_000_000
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _gpu_sleep(probe // 10)
    _event_record(start)
    _gpu_sleep(probe)
    _event_record(end)
    _event_sync(end)
    return max(1, int(probe * ms / max(float(_event_elapsed(start, end)), 1e-3)))


def _storage_ptrs(out: Any) -> list[int]:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.untyped_storage().data_ptr() for o in outs if isinstance(o, torch.Tensor) and o.numel()]


def _nothing(*_: Any) -> None:
    return None


REGION_TARGET_MS = 2.0  # calls per region until a region holds about this much GPU work ...
MAX_CALLS_PER_REGION = 32  # ... so the region's own cost (about 0.02-0.05 ms) is about 2 % of a call or less
REGION_MOST_MS = 40.0  # a side's regions hold no more work than this for the other side's sake (RegionSizes)
FLOOR_ITERS = 5
SIZING_REGIONS = 3  # single-call regions whose fastest sizes the regions: the first one after warm-up
# can be slow (a 64-element add took 0.083 ms alone, so its regions held 24 calls, not 32)


def time_calls(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]], device: str, iters: int,
               warmup: int, hold_bytes: int, on_output: Callable[[int, Any], None] | None = None,
               max_calls_per_region: int = MAX_CALLS_PER_REGION, calls: int = 0) -> dict[str, Any]:
    """Time `fn(*inputs)` over `iters` timed regions rotating `input_sets`.

    Every call gets a fresh copy of its input set, and copies and outputs are kept alive
    (up to `hold_bytes`), so no two calls see the same addresses: a cache keyed by pointer
    never hits, and an output returned twice (a memo keyed by content) shows up as reused
    output storage. `on_output(set_index, output)` runs outside the timed region after
    every call.

    On a GPU a region holds one call, or several back to back when one call is short (see
    `calls_per_region`); a sample is the region's time divided by its calls. A region opens
    behind the flusher's lead (the first call's launch is hidden) and is closed by a
    device-wide synchronize, so it pays the synchronize's return once (`floor_ms`). Without
    the lead a region also paid the first launch: 0.014-0.029 ms of floor on the H200, where
    every 0.06-0.09 ms translation kernel's fastest single-call sample sat at about 0.056 ms
    and eight calls in one region took 0.03 ms each. Back to back, the host launches
    call j+1 while the GPU runs call j, so a call costs the larger of its host and GPU time;
    the inputs of each call are its own fresh copy, cold in the L2 flushed before the region.
    Multi-process callers whose calls must match across ranks pass `max_calls_per_region=1`.
    `calls` > 0 sets the calls per region (see `RegionSizes`; still no more than `hold_bytes`
    holds); 0 sizes them here.
    """
    cuda = device.startswith("cuda")
    flush = L2Flusher(torch.device(device)) if cuda else None
    for i in range(warmup):
        fn(*_fresh_copy(input_sets[i % len(input_sets)]))
    size = _nbytes(input_sets[0])
    if calls > 0:
        calls = _within_hold(calls, size, hold_bytes)
    else:
        single_ms = min(_timed_region(fn, _fresh_copy(input_sets[0]), flush)[0] for _ in range(SIZING_REGIONS))
        calls = calls_per_region(single_ms, size, hold_bytes, max_calls_per_region)
    if cuda:
        _prime_allocator(input_sets, size, iters * calls, hold_bytes)
        _cuda_sync()
    times, host = [], []
    held: list[Any] = []
    held_bytes = 0
    seen_ptrs: set[int] = set()
    reused = allocs = 0
    for i in range(iters):
        picks = [(i * calls + j) % len(input_sets) for j in range(calls)]
        copies = [_fresh_copy(input_sets[k]) for k in picks]
        size = sum(_nbytes(c) for c in copies)
        if held_bytes + 2 * size > hold_bytes:
            held.clear(); seen_ptrs.clear(); held_bytes = 0

        def region() -> list[Any]:
            return [fn(*c) for c in copies]

        segments = _segments_allocated() if cuda else 0
        event_ms, host_ms, outs = _timed_region(region, (), flush)
        if cuda:
            allocs += _segments_allocated() - segments
        times.append(event_ms / calls)
        host.append(host_ms / calls)
        for k, inputs, out in zip(picks, copies, outs):
            ptrs = _storage_ptrs(out)
            reused += any(p in seen_ptrs for p in ptrs)
            seen_ptrs.update(ptrs)
            held.append((inputs, out))
            if on_output is not None:
                on_output(k, out)
        held_bytes += 2 * size
        del outs
    held.clear()
    result = {"times_ms": times, "host_ms": host, "unit": "cuda_events" if cuda else "cpu_wall",
              "l2_flush": cuda, "reused_output_storage": reused, "device_allocs": allocs,
              "calls_per_region": calls}
    if flush is not None:
        result["floor_ms"] = [_cuda_region(_nothing, (), flush)[0] for _ in range(FLOOR_ITERS)]
    return result


def calls_per_region(single_ms: float, nbytes: int, hold_bytes: int, most: int) -> int:
    """Calls in one timed region: enough that the region holds about REGION_TARGET_MS of work
    (a call of 2 ms or more is timed alone, as before), at most `most`, and no more fresh
    input copies and outputs than `hold_bytes` holds at once."""
    wanted = math.ceil(REGION_TARGET_MS / max(single_ms, 1e-3))
    return _within_hold(min(wanted, most), nbytes, hold_bytes)


def _within_hold(calls: int, nbytes: int, hold_bytes: int) -> int:
    """`calls`, at least one, but no more fresh input copies and outputs than `hold_bytes` holds."""
    return max(1, min(calls, hold_bytes // max(2 * nbytes, 1)))


class RegionSizes:
    """Calls per timed region for the implementations one timing compares. Each sizes its
    own regions in its first round; once all have, every later round of every one uses the
    largest of those counts. Sized anew every round, the same 0.028 ms kernel's regions held
    12-32 calls (eighth session, H200), so the region's own cost (floor/calls of a sample)
    moved by several per cent from round to round and between the two sides.

    A side whose one call takes REGION_MOST_MS or more (noted with `call_ms`) is held to regions
    of about that much work, never fewer calls than its own count: a region's own cost is then
    0.1 % of a call or less, so the larger count bought no accuracy, only time with the GPU held
    alone (sixteenth session: rigid_body_simulation's 90 ms reference timed 7 calls per region
    beside its 0.33 ms oracle, 26 s of the 29 s its timing held the GPU; 71 of the pass's 153 s
    of timed regions were such extra calls)."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self.used: dict[str, list[int]] = {}  # name -> the calls per region of each of its rounds
        self.call_ms: dict[str, float] = {}   # name -> one call's median time in its first round

    def request(self, name: str) -> int:
        """The count `name`'s next round must use; 0: size your own."""
        if not all(n in self.used for n in self.names):
            return 0
        largest = max(used[0] for used in self.used.values())
        call_ms = self.call_ms.get(name)
        if call_ms:
            largest = max(self.used[name][0], min(largest, max(1, math.floor(REGION_MOST_MS / call_ms))))
        return largest

    def note(self, name: str, calls: int, call_ms: float | None = None) -> None:
        """The count `name`'s round just used (and the median time of one of its calls)."""
        self.used.setdefault(name, []).append(int(calls))
        if call_ms and name not in self.call_ms:
            self.call_ms[name] = float(call_ms)


def _timed_region(fn: Callable[..., Any], inputs: Sequence[Any], flush: "L2Flusher | None",
                  ready: Callable[[], Any] = _nothing) -> tuple[float, float, Any]:
    """_cuda_region on a GPU (with its L2 flusher); on a CPU the host clock around the call, twice.
    `ready()` runs just before the clock starts (the rank workers' release)."""
    if flush is not None:
        return _cuda_region(fn, inputs, flush, ready)
    ready()
    t0 = _perf_counter_ns()
    out = fn(*inputs)
    ms = (_perf_counter_ns() - t0) / 1e6
    return ms, ms, out


def _cuda_region(fn: Callable[..., Any], inputs: Sequence[Any], flush: "L2Flusher",
                 ready: Callable[[], Any] = _nothing) -> tuple[float, float, Any]:
    """One timed region: L2 flushed, then CUDA events around the call, the start behind the
    flusher's lead, the region closed by a device-wide synchronize (work left on a side stream
    still counts). Returns the event time, the host time around the same region (ms; it also
    waits out what remains of the lead) and the call's output."""
    flush()
    _cuda_sync()
    ready()
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    flush.lead()
    t0 = _perf_counter_ns()
    _event_record(start)
    out = fn(*inputs)
    _cuda_sync()
    _event_record(end)
    _event_sync(end)
    t1 = _perf_counter_ns()
    return float(_event_elapsed(start, end)), (t1 - t0) / 1e6, out


def _prime_allocator(input_sets: Sequence[Sequence[Any]], size: int, calls: int, hold_bytes: int) -> None:
    """Let the caching allocator reserve, before any region is timed, what the timed loop will
    hold: fresh input copies and outputs (taken to be as large) of up to `calls` calls.
    Its blocks are then reused, not cudaMalloc'ed inside a region (tens of microseconds, and
    fresh pages): smith_waterman's oracle paid 9 such calls per evaluation, and its first
    samples ran 3-10 % slow. `size`: the bytes of one input set."""
    if size == 0:
        return
    copies = 2 * min(calls, hold_bytes // (2 * size))
    primed = [_fresh_copy(input_sets[i % len(input_sets)]) for i in range(copies)]
    del primed


def interleaved(timers: dict[str, Callable[[int, int], Any]], iters: int, warmup: int, rounds: int = 5,
                budget_ms: float = 0.0, iters_max: int = 0,
                times_of: Callable[[str, Any], Sequence[float]] | None = None) -> dict[str, list[Any]]:
    """Time several implementations in alternating rounds, ABBA order (A B, B A, A B, ...),
    so clock and thermal drift over the measurement falls on each alike: timed one after
    the other, the same kernel measured 0.88x-1.09x against itself on the H200.
    `timers[name](n, warmup)` times n iterations and returns its reply; each name gets
    `warmup` untimed calls in its first round and one in each later round (its caches went
    cold while the other ran). Returns every name's replies in order.

    With a `budget_ms` (and `times_of(name, reply)` to read a reply's times), the first
    round sizes the rest: a short kernel gets more iterations, until its own add up to about
    `budget_ms` (at most `iters_max`; each name its own count, so a 30 ms reference beside a
    0.3 ms oracle keeps about `iters`), over up to four times more rounds. Thirty samples of
    a 0.07 ms kernel, whose single iterations scatter by 20 %, put the same library at
    1.13x-1.42x against itself on the H200 (2026-11-30); a time budget is what Triton's
    do_bench and nvbench do too."""
    names = list(timers)
    replies: dict[str, list[Any]] = {name: [] for name in names}
    planned = max(rounds, 1)
    first = max(1, math.ceil(iters / planned))
    per = {name: first for name in names}
    r = 0
    while r < planned:
        for name in (names if r % 2 == 0 else names[::-1]):
            replies[name].append(timers[name](per[name], warmup if r == 0 else 1))
        if r == 0 and budget_ms > 0 and times_of is not None:
            wanted = {name: _budgeted(statistics.median(times_of(name, replies[name][0])), iters, budget_ms, iters_max)
                      for name in names}
            planned = min(max(math.ceil(max(wanted.values()) / 10), planned), 4 * planned)
            per = {name: max(1, math.ceil((wanted[name] - first) / max(planned - 1, 1))) for name in names}
        r += 1
    return replies


def _budgeted(median_ms: float, iters: int, budget_ms: float, iters_max: int) -> int:
    """Iterations of a kernel of `median_ms` that add up to `budget_ms`, within [iters, iters_max]."""
    return min(max(iters, math.ceil(budget_ms / max(median_ms, 1e-6))), max(iters_max, iters))


def budget(settings: dict[str, Any], cpu: bool, times_of: Callable[[str, Any], Sequence[float]]) -> dict[str, Any]:
    """interleaved()'s budget arguments from a job's "timing" settings (none on a CPU)."""
    if cpu:
        return {}
    return {"budget_ms": float(settings.get("budget_ms", 0.0)), "iters_max": int(settings.get("iters_max", 0)),
            "times_of": times_of}


def joined(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The timed iterations of several rounds (time_calls results), in order, and the
    allocator segments they created inside their timed regions."""
    out: dict[str, Any] = {key: [x for c in chunks for x in c[key]] for key in ("times_ms", "host_ms")}
    out["device_allocs"] = sum(int(c.get("device_allocs", 0)) for c in chunks)
    out["floor_ms"] = [x for c in chunks for x in c.get("floor_ms", [])]
    out["calls_per_region"] = [int(c["calls_per_region"]) for c in chunks if "calls_per_region" in c]
    out["round_sizes"] = [len(c["times_ms"]) for c in chunks]
    return out


def region_times(measured: dict[str, Any]) -> list[float]:
    """A time_calls() result's samples as whole regions: what the time budget counts."""
    return [t * int(measured.get("calls_per_region", 1)) for t in measured["times_ms"]]


def rounds(measured: dict[str, Any]) -> list[list[float]]:
    """A joined() measurement's samples, split back into its rounds (one round if unknown)."""
    times = list(measured["times_ms"])
    sizes = measured.get("round_sizes") or [len(times)]
    out, i = [], 0
    for n in sizes:
        out.append(times[i:i + n])
        i += n
    return out


def summary(measured: dict[str, Any]) -> dict[str, Any]:
    """stats() of one side's joined() measurement, with its diagnostics."""
    return stats(measured["times_ms"], measured.get("device_allocs"), measured.get("floor_ms", ()),
                 measured.get("calls_per_region", ()), measured.get("round_sizes", ()))


def _segments_allocated() -> int:
    """cudaMalloc calls of torch's caching allocator so far on this device. One inside a
    timed region adds tens of microseconds: how many a side paid is in its record, since
    a process's allocator history (not its kernel) can decide it."""
    return int(torch.cuda.memory_stats().get("segment.all.allocated", 0))
