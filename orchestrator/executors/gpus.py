"""GPUs of one machine shared by concurrent episodes.

An episode leases the GPUs it needs from a `GpuPool` (one, or world_size for a
collectives problem) for its whole life; several episodes may lease the same GPU
(up to `slots_per_gpu`) because most of an episode is the model thinking. On each
GPU a shared/exclusive lock keeps measurements honest:

- `lease.shared()` around GPU work that does not measure (the tools: check, specs,
  compile in the episode's sandbox); any number of episodes at once;
- `lease.scoring()` around the scoring judge: no lock at all, only the busy accounting,
  because the judge takes this host's GPU lock files itself (runner/judge.py `gpu_lock`):
  shared for loading and for correctness and stress trials, exclusively for timing. Trials
  of several scorings overlap on a GPU; a timing overlaps nothing. A measurement from the
  host takes the same lock files exclusively (sandbox/gpu_holds.py), so it waits for the
  trials running now, not for whole scorings: holding scorings shared here made every ncu
  after a scoring wait for all the other scorings on its GPU to end while no new one could
  start, and the GPU emptied and refilled in waves of `slots_per_gpu` (eleventh session, 2026-12-01).
  A judge that cannot reach the lock files (in a container) is held exclusively from the
  host instead (sandbox/gpu_holds.py);
- `lease.exclusive()` around a measurement from the host (roofline's ceilings, ncu) and
  such a container's whole judge: no tool call runs on those GPUs meanwhile, and the host's
  lock files keep every judge's kernels off them.

CPU-only steps (static analysis, creating the sandbox, copying files, the model's
turns) hold neither. Writers are preferred, so a waiting measurement is never starved
by a stream of tool calls. The pool accounts, per GPU, the time some scoring or
measurement held it (the union of their holds): `scripts/bench_executors.py` reports it
as the busy share.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence


class SharedExclusiveLock:
    """A reader-writer lock for threads, writer-preferring."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._writers_waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._writers_waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class HostGpuLock:
    """The same two holds across processes of one host: flock(2) on a file per GPU. Ray
    tasks that share a GPU (fractional num_gpus) run in different worker processes.
    flock has no writer preference: a waiting scoring run gets the GPU once no tool call
    holds it, which tool calls (short, between model turns) leave room for."""

    def __init__(self, path: Path):
        self.path = path

    @contextlib.contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)           # closing the descriptor releases the lock

    def shared(self) -> contextlib.AbstractContextManager[None]:
        return self._hold(fcntl.LOCK_SH)

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        return self._hold(fcntl.LOCK_EX)


def host_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "popcorn-gpu-locks"


@dataclass
class GpuState:
    index: int
    lock: SharedExclusiveLock | HostGpuLock = field(default_factory=SharedExclusiveLock)
    holders: int = 0                 # episodes leasing this GPU now
    busy_s: float = 0.0              # time some scoring or measurement held it (overlaps count once)
    busy_since: float | None = None  # start of the current busy stretch
    busy_holds: int = 0              # scorings and measurements holding it now
    _count: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def busy_enter(self, now: float) -> None:
        with self._count:
            if self.busy_holds == 0:
                self.busy_since = now
            self.busy_holds += 1

    def busy_exit(self, now: float) -> None:
        with self._count:
            self.busy_holds -= 1
            if self.busy_holds == 0 and self.busy_since is not None:
                self.busy_s += now - self.busy_since
                self.busy_since = None


class Lease:
    """The GPUs one episode holds; `gpus` is () on a CPU host (then both holds are no-ops)."""

    def __init__(self, pool: "GpuPool | None", states: Sequence[GpuState]):
        self._pool = pool
        self._states = tuple(sorted(states, key=lambda s: s.index))  # one lock order: no deadlock
        self.released = False
        self.scoring_s = 0.0        # this lease's time under scoring and exclusive holds
        self.spans: list[tuple[float, float]] = []  # those holds in epoch seconds (busy share from records)

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(s.index for s in self._states)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for state in self._states:
                stack.enter_context(state.lock.shared())
            yield

    @contextlib.contextmanager
    def scoring(self) -> Iterator[None]:
        """The scoring judge's hold: busy accounting only, since the judge holds the host's lock
        files itself around its kernels (shared for trials, alone for timing)."""
        with self._busy():
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for state in self._states:
                stack.enter_context(state.lock.exclusive())
            with self._busy():
                yield

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        start, wall = time.monotonic(), time.time()
        for state in self._states:
            state.busy_enter(start)
        try:
            yield
        finally:
            end = time.monotonic()
            self.scoring_s += end - start
            self.spans.append((round(wall, 3), round(wall + end - start, 3)))
            for state in self._states:
                state.busy_exit(end)

    def release(self) -> None:
        if not self.released and self._pool is not None:
            self._pool._release(self._states)
        self.released = True

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


NO_GPU = Lease(None, ())


class GpuPool:
    """Hands out leases of `count` GPUs, first come first served, least-loaded GPUs first."""

    def __init__(self, gpus: Sequence[int], slots_per_gpu: int = 1):
        if slots_per_gpu < 1:
            raise ValueError("slots_per_gpu must be at least 1")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"GPU indices repeat: {list(gpus)}")
        self.states = {g: GpuState(g) for g in gpus}
        self.slots_per_gpu = slots_per_gpu
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(self.states)

    def acquire(self, count: int) -> Lease:
        """Block until `count` GPUs each have a free slot; count 0 (a CPU-only episode) is NO_GPU."""
        if count <= 0 or not self.states:
            return NO_GPU
        if count > len(self.states):
            raise ValueError(f"an episode needs {count} GPUs; the pool has {len(self.states)}")
        with self._cond:
            ticket, self._next_ticket = self._next_ticket, self._next_ticket + 1
            while True:
                free = [s for s in self.states.values() if s.holders < self.slots_per_gpu]
                if ticket == self._serving and len(free) >= count:
                    break
                self._cond.wait()
            chosen = sorted(free, key=lambda s: (s.holders, s.index))[:count]
            for state in chosen:
                state.holders += 1
            self._serving += 1
            self._cond.notify_all()
        return Lease(self, chosen)

    def _release(self, states: Sequence[GpuState]) -> None:
        with self._cond:
            for state in states:
                state.holders -= 1
            self._cond.notify_all()

    def busy_seconds(self) -> dict[int, float]:
        """Time some scoring or measurement held each GPU so far (a hold in progress counts)."""
        now = time.monotonic()
        return {g: s.busy_s + (now - s.busy_since if s.busy_since is not None else 0.0)
                for g, s in self.states.items()}


def merged_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping [start, end) intervals (each instant once)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def held_seconds(records: list[dict[str, Any]], gpu: int) -> float:
    """Time some scoring held `gpu` in a run, from its records: the union of their
    `placement.gpu_spans` (scorings on one GPU overlap, except their timings), or, in records
    from before spans (2026-12-01), the sum of `gpu_exclusive_s` (those holds never overlapped)."""
    mine = [p for p in ((r.get("placement") or {}) for r in records) if gpu in p.get("gpus", [])]
    if not all("gpu_spans" in p for p in mine):
        return sum(p.get("gpu_exclusive_s", p.get("gpu_scoring_s", 0.0)) for p in mine)
    return merged_length([tuple(span) for p in mine for span in p["gpu_spans"]])

