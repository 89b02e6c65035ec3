"""The GPU pool and its shared/exclusive leases, with real threads."""
from __future__ import annotations

import threading
import time

import pytest

from orchestrator.executors.gpus import GpuPool, SharedExclusiveLock


def _start(fn) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_exclusive_waits_for_shared_holders_and_blocks_new_ones():
    lock = SharedExclusiveLock()
    events: list[str] = []
    shared_in, release_shared = threading.Event(), threading.Event()

    def reader(name: str, hold: threading.Event | None) -> None:
        with lock.shared():
            events.append(f"{name} in")
            if hold is not None:
                shared_in.set()
                hold.wait(5)
            events.append(f"{name} out")

    def writer() -> None:
        with lock.exclusive():
            events.append("writer in")
            time.sleep(0.05)
            events.append("writer out")

    first = _start(lambda: reader("r1", release_shared))
    assert shared_in.wait(5)
    w = _start(writer)
    time.sleep(0.1)                 # the writer now waits for r1
    late = _start(lambda: reader("r2", None))
    time.sleep(0.1)
    assert events == ["r1 in"]      # r2 queues behind the waiting writer (writer preference)
    release_shared.set()
    for t in (first, w, late):
        t.join(5)
    assert events == ["r1 in", "r1 out", "writer in", "writer out", "r2 in", "r2 out"]


def test_exclusive_holds_on_one_gpu_never_overlap_and_other_gpus_run_meanwhile():
    pool = GpuPool([0, 1], slots_per_gpu=3)
    intervals: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    guard = threading.Lock()

    def episode() -> None:
        with pool.acquire(1) as lease:
            with lease.exclusive():
                start = time.monotonic()
                time.sleep(0.05)
                end = time.monotonic()
            with guard:
                intervals[lease.gpus[0]].append((start, end))

    threads = [_start(episode) for _ in range(6)]
    for t in threads:
        t.join(10)
    assert sorted(len(v) for v in intervals.values()) == [3, 3]   # least-loaded GPU first
    for spans in intervals.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    busy = pool.busy_seconds()
    assert all(0.14 < busy[g] < 1.0 for g in (0, 1))
    # the two GPUs worked at the same time: the whole took well under the sum of the holds
    first = min(s for spans in intervals.values() for s, _ in spans)
    last = max(e for spans in intervals.values() for _, e in spans)
    assert last - first < sum(busy.values()) * 0.9


def test_scoring_holds_share_a_gpu_count_once_as_busy_and_do_not_hold_up_measurements():
    """Two episodes' scorings on one GPU overlap (each judge keeps its own timing alone with
    the host's lock files); a measurement does not wait for them to end (the lock files keep
    it off their kernels) but does wait for a tool call; the GPU's busy time is the union of
    the holds, not their sum."""
    pool = GpuPool([0], slots_per_gpu=4)
    first, second, measurer, tools = (pool.acquire(1) for _ in range(4))
    both_in = threading.Barrier(2, timeout=5)
    events: list[str] = []

    def scoring(lease) -> None:
        with lease.scoring():
            both_in.wait()           # would time out if one scoring excluded the other
            time.sleep(0.4)
            events.append("scored")

    def tool_call() -> None:
        with tools.shared():
            time.sleep(0.2)
            events.append("tool")

    scorers = [_start(lambda lease=lease: scoring(lease)) for lease in (first, second)]
    tool = _start(tool_call)
    time.sleep(0.1)
    with measurer.exclusive():
        events.append("measured")
    for t in scorers + [tool]:
        t.join(5)
    assert events == ["tool", "measured", "scored", "scored"]
    busy = pool.busy_seconds()[0]
    assert 0.4 <= first.scoring_s < 0.7 and 0.4 <= second.scoring_s < 0.7
    assert busy < first.scoring_s + second.scoring_s - 0.2      # the overlap counted once
    assert busy >= max(first.scoring_s, second.scoring_s)


def test_slots_bound_episodes_per_gpu_and_a_multi_gpu_lease_waits_its_turn():
    pool = GpuPool([0, 1], slots_per_gpu=1)
    a = pool.acquire(1)
    b = pool.acquire(1)
    assert sorted(a.gpus + b.gpus) == [0, 1]
    got: list[tuple[int, ...]] = []
    waiter = _start(lambda: got.append(pool.acquire(2).gpus))
    time.sleep(0.1)
    assert not got                  # both GPUs are taken
    a.release()
    time.sleep(0.1)
    assert not got                  # one free GPU is not enough for two
    b.release()
    waiter.join(5)
    assert got == [(0, 1)]


def test_first_come_first_served():
    pool = GpuPool([0], slots_per_gpu=1)
    held = pool.acquire(1)
    order: list[str] = []

    def take(name: str) -> None:
        with pool.acquire(1):
            order.append(name)

    threads = []
    for name in ("first", "second", "third"):
        threads.append(_start(lambda n=name: take(n)))
        time.sleep(0.05)            # queue them in this order
    held.release()
    for t in threads:
        t.join(5)
    assert order == ["first", "second", "third"]


def test_bad_requests_fail_loudly_and_a_cpu_lease_holds_nothing():
    with pytest.raises(ValueError, match="needs 3 GPUs"):
        GpuPool([0, 1]).acquire(3)
    with pytest.raises(ValueError, match="repeat"):
        GpuPool([0, 0])
    lease = GpuPool([]).acquire(1)
    assert lease.gpus == ()
    with lease.exclusive(), lease.shared():   # no GPU: nothing to wait for
        pass


def test_host_lock_excludes_across_processes(tmp_path):
    """HostGpuLock (flock) between this process and a child: the child's exclusive hold
    waits for our shared one; a second shared hold does not wait."""
    import subprocess
    import sys

    from orchestrator.executors.gpus import HostGpuLock

    path = tmp_path / "gpu-0.lock"
    lock = HostGpuLock(path)
    child = ("import sys, time; from pathlib import Path; from orchestrator.executors.gpus import HostGpuLock\n"
             "lock = HostGpuLock(Path(sys.argv[1])); t = time.monotonic()\n"
             "with getattr(lock, sys.argv[2])(): print(round(time.monotonic() - t, 2))")
    with lock.shared():
        shared = subprocess.Popen([sys.executable, "-c", child, str(path), "shared"], stdout=subprocess.PIPE, text=True)
        exclusive = subprocess.Popen([sys.executable, "-c", child, str(path), "exclusive"], stdout=subprocess.PIPE,
                                     text=True)
        assert float(shared.communicate(timeout=60)[0]) < 1.0
        time.sleep(1.5)
        assert exclusive.poll() is None        # still waiting for our shared hold
    assert float(exclusive.communicate(timeout=60)[0]) >= 1.0
