"""One rank of a multi-GPU translation task: a library process bound to one GPU.

Started by the multi-GPU judge (multijudge.py) with multiprocessing's spawn context,
one process per rank, all sharing one barrier. Requests on a private pipe:

    {"op": "alloc", "sizes": {name: bytes}}        -> {"ok", "handles": {name: bytes}}
    {"op": "open", "handles": {name: [h_0..h_w-1]}} -> {"ok"}   (peer pointer arrays built)
    {"op": "run", "inputs", "outputs"}              -> {"ok", "output", "mutated_inputs"}
    {"op": "time", "input_sets" (first round), "iters", "warmup"} -> {"ok", "timing"}
    {"op": "exit"}

Every call into the library is preceded by a barrier wait, so all ranks enter it
together (the kernels wait for their peers); a rank that fails breaks the barrier and
the others stop instead of hanging.

Timed iterations are released by a spinning barrier on shared memory (`release`), not
by the multiprocessing barrier: waking a process blocked in that barrier's semaphores
takes several context switches (tens of microseconds, more from a deep CPU idle
state), the first rank released starts its clock while a peer is still waking, and an
all-reduce's time on it includes the wait. That skew depends on where the OS placed a
group's processes, so it can differ between the candidate's and the reference's rank
groups: our account of the same all-reduce library timing 1.19x against itself on two
H200s (the timing stage now reports the skew, `release_skew_us`).
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any

# Bound before the library is loaded (see timing.TimerGuard).
from orchestrator.runner import timing, wire
from orchestrator.runner.problem import import_file, to_device
from orchestrator.translation.libworker import _describe, _send, load_entry
from orchestrator.translation.shared import CudaShared, HostShared

import torch

_perf_counter_ns = timing._perf_counter_ns
_cuda_sync = timing._cuda_sync


def serve_rank(conn: Any, job: dict[str, Any], library: str, rank: int, barrier: Any, log_path: str,
               release: Any = None) -> None:
    """`release`: the group's shared int64 array of world_size + 1 slots for SpinRelease
    (None: timed iterations are released by `barrier` too)."""
    log = open(log_path, "ab", buffering=0)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    guard = timing.TimerGuard()
    world_size, device = int(job["world_size"]), job["devices"][rank]
    # torchrun's variables, before the library loads (its threads may read the environment later):
    # Flux's sm80 kernels read LOCAL_RANK / LOCAL_WORLD_SIZE on every call
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                       "LOCAL_WORLD_SIZE": str(world_size)})
    cuda = device.startswith("cuda")
    wait_s = float(job.get("trial_timeout_s") or 120)
    try:
        if cuda:
            torch.cuda.set_device(torch.device(device))
        glue = import_file(os.path.join(job["task_dir"], "task.py"), "popcorn_translation_task")
        entry = load_entry(library, job["symbol"], glue.ARGTYPES)
        shared = CudaShared(job["ipc_helper"]) if cuda else HostShared()
    except BaseException as exc:
        _send(conn, {"ok": False, "kind": "runtime_error", "error": _describe(exc)})
        return
    _send(conn, {"ok": True})
    own: dict[str, int] = {}
    peers: dict[str, int] = {}
    keep: list[Any] = []  # ctypes pointer arrays handed to the library must outlive the calls
    timing_sets: dict[str, Any] = {}  # shipped with the first timing round only
    spin = SpinRelease(release, rank, world_size) if release is not None else None

    def call(*inputs: Any) -> Any:
        stream = torch.cuda.current_stream().cuda_stream if cuda else 0
        return glue.launch(entry, inputs, peers, rank, world_size, stream)

    try:
        while True:
            try:
                msg = wire.recv(conn)
            except (EOFError, OSError):
                return
            op = msg["op"]
            if op == "exit":
                return
            try:
                if op == "alloc":
                    handles = {}
                    for name, nbytes in msg["sizes"].items():
                        own[name], handles[name] = shared.alloc(int(nbytes))
                    reply: dict[str, Any] = {"ok": True, "handles": handles}
                elif op == "open":
                    for name, hs in msg["handles"].items():
                        ptrs = [own[name] if j == rank else shared.open(h) for j, h in enumerate(hs)]
                        array = (ctypes.c_void_p * world_size)(*ptrs)
                        keep.append(array)
                        peers[name] = ctypes.addressof(array)
                    reply = {"ok": True}
                elif op == "run":
                    reply = _run(msg, call, barrier, wait_s, cuda, device)
                elif op == "time":
                    reply = {"ok": True, "timing": _time(msg, call, barrier, wait_s, cuda, device, spin,
                                                                  timing_sets)}
                else:
                    raise ValueError(f"unknown op {op!r}")
            except threading.BrokenBarrierError:
                reply = {"ok": False, "kind": "runtime_error",
                         "error": f"rank {rank}: another rank failed or timed out (barrier broken)"}
            except BaseException as exc:
                barrier.abort()  # release the other ranks instead of letting them wait for this one
                if spin is not None:
                    spin.abort()
                reply = {"ok": False, "kind": "runtime_error", "error": f"rank {rank}: {_describe(exc)}"}
            tampered = guard.tampered()
            if tampered:
                reply = {"ok": False, "kind": "hack_detected", "error": f"timer_tampered: {', '.join(tampered)}"}
            _send(conn, reply)
    finally:
        shared.close()


def _run(msg: dict[str, Any], call: Any, barrier: Any, wait_s: float, cuda: bool, device: str) -> dict[str, Any]:
    inputs = to_device(msg["inputs"], device)
    read_only = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and i not in msg.get("outputs", ())]
    before = {i: inputs[i].clone() for i in read_only}
    if cuda:
        _cuda_sync()
    barrier.wait(wait_s)
    out = call(*inputs)
    if cuda:
        _cuda_sync()
    mutated = [i for i in read_only if not torch.equal(torch.nan_to_num(before[i]), torch.nan_to_num(inputs[i]))]
    return {"ok": True, "output": to_device(out, "cpu"), "mutated_inputs": mutated}


class SpinRelease:
    """All ranks leave together: each writes its generation into its own slot of a shared
    int64 array and spins (yielding the CPU) until every slot has reached it. Slots only
    grow, so a rank already waiting for the next generation still counts as arrived; the
    last slot is the abort flag a failing rank raises."""

    def __init__(self, slots: Any, rank: int, world_size: int):
        self.slots, self.rank, self.world_size = slots, rank, world_size
        self.generation = 0

    def wait(self, timeout_s: float) -> int:
        """Returns the release time (perf_counter_ns, one clock for every process of the host)."""
        self.generation += 1
        gen, slots, ranks = self.generation, self.slots, range(self.world_size)
        slots[self.rank] = gen
        deadline, spins = time.monotonic() + timeout_s, 0
        while True:
            if slots[self.world_size]:
                raise threading.BrokenBarrierError
            if all(slots[j] >= gen for j in ranks):
                return _perf_counter_ns()
            spins += 1
            if spins % 4096 == 0 and time.monotonic() > deadline:
                self.abort()
                raise threading.BrokenBarrierError
            os.sched_yield()

    def abort(self) -> None:
        self.slots[self.world_size] = 1


def _time(msg: dict[str, Any], call: Any, barrier: Any, wait_s: float, cuda: bool, device: str,
          spin: SpinRelease | None, cache: dict[str, Any]) -> dict[str, Any]:
    """The core's timing rules (fresh input copies, L2 flush, events closed by a device
    synchronize, warm-up excluded, the allocator primed), with every region released by
    `spin` (else the barrier). A region holds `calls_per_region` calls back to back, the
    same count on every rank (the judge sizes it: ranks must make the same calls), and a
    sample is the region's time over its calls. `release_ns`: when this rank was released,
    per timed region (the judge reports the skew)."""
    sets = timing.cached_sets(cache, msg, lambda sets: [to_device(s, device) for s in sets])
    flush = timing.L2Flusher(torch.device(device)) if cuda else None
    fresh = timing._fresh_copy
    calls = max(1, int(msg.get("calls_per_region", 1)))

    def release() -> int:
        if spin is not None:
            return spin.wait(wait_s)
        barrier.wait(wait_s)
        return _perf_counter_ns()

    for i in range(int(msg["warmup"])):
        inputs = fresh(sets[i % len(sets)])
        release()
        call(*inputs)
        if cuda:
            _cuda_sync()
    if cuda:
        size = timing._nbytes(sets[0])
        timing._prime_allocator(sets, size, calls, 2 * calls * size)  # room for one region's copies
        _cuda_sync()
    times, host, released = [], [], []
    for i in range(int(msg["iters"])):
        copies = [fresh(sets[(i * calls + j) % len(sets)]) for j in range(calls)]
        event_ms, host_ms, _ = timing._timed_region(lambda copies=copies: [call(*c) for c in copies], (), flush,
                                                    ready=lambda: released.append(release()))
        times.append(event_ms / calls)
        host.append(host_ms / calls)
    return {"times_ms": times, "host_ms": host, "release_ns": released, "unit": "cuda_events" if cuda else "cpu_wall",
            "l2_flush": cuda, "calls_per_region": calls}
