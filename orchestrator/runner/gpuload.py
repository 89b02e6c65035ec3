"""A load on the GPU, from the judge's process, while a candidate runs a correctness trial.

Some races show more often when the GPU is shared: a kernel that releases a shared-memory
buffer while its own TMA store may still be reading it computes wrong now and then, and more
often beside other work. CUTLASS example 88's backward did exactly that (tr-fa2-bwd's H100
reference, in back-to-back calls: 34 % wrong on a quiet H100, 46 % beside this load, 72 %
beside a loading process; 2 of about 90 trials in lanes; docs/decisions.md, "Source fixes").
Without a load of our own, whether such a kernel passed depended on which other evaluations
happened to share the GPU. So the judges run a few correctness trials with this load on
(`loaded` trials, several calls each) and record how much load ran during each.

The load is a thread of the judge, on a CUDA stream of its own in the judge's context (to the
candidate's process it is another process on the GPU): fp32 matmuls (the SMs) and copies
between two buffers larger than L2 (DRAM), into buffers allocated once, one synchronized
iteration at a time, so that a pause ends within one iteration. Being the judge's own thread,
the candidate cannot stop or kill the load without stopping or killing its judge (which is
already its failure). The judge frees the buffers when correctness ends. A load that fails
raises LoadError, which the judge reports as its own failure (infra_error). This module is
part of the runner, which the problem images carry alone: it imports nothing else of ours.
"""
from __future__ import annotations

import threading
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any, Iterator

import torch

COPY_MIB = 256  # each of two buffers: several times an H100's 50 MB L2
SIDE = 4096  # fp32 matmul operands on a GPU (a few ms an iteration on an H100); 256 on a CPU
PAUSE_TIMEOUT_S = 60.0


class LoadError(RuntimeError):
    """The judge's GPU load failed: the judge's own error, never the candidate's."""


class GpuLoad:
    """`with load.running() as info:` the load runs for the body; then `info["load_iterations"]`.
    Nothing is allocated until the first run; `close()` frees it all, and a later run starts again."""

    def __init__(self, device: str, mib: int = COPY_MIB) -> None:
        self.device, self.mib = device, mib
        self.cuda = device.startswith("cuda")
        self._go, self._idle, self._busy = threading.Event(), threading.Event(), threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.iterations = 0

    def _start(self) -> None:
        side = SIDE if self.cuda else 256
        self._a = torch.randn(side, side, device=self.device)
        self._c = torch.empty_like(self._a)
        self._src = torch.zeros(self.mib << 18, device=self.device)  # mib MiB of fp32
        self._dst = torch.empty_like(self._src)
        self._stream = torch.cuda.Stream(device=self.device) if self.cuda else None
        self._stop = False
        self._idle.set()
        self._thread = threading.Thread(target=self._serve, name="popcorn-gpu-load", daemon=True)
        self._thread.start()

    def _iteration(self) -> None:
        torch.mm(self._a, self._a, out=self._c)
        self._dst.copy_(self._src)
        if self._stream is not None:
            self._stream.synchronize()  # one iteration queued at a time: a pause ends within one

    def _serve(self) -> None:
        if self.cuda:
            torch.cuda.set_device(torch.device(self.device))
        try:
            while True:
                self._go.wait()
                if self._stop:
                    return
                self._idle.clear()
                self._busy.set()
                with torch.cuda.stream(self._stream) if self._stream is not None else nullcontext():
                    while self._go.is_set() and not self._stop:
                        self._iteration()
                        self.iterations += 1
                self._idle.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the judge's thread at the pause
            self._error = exc
            self._idle.set()

    @contextmanager
    def running(self, on: bool = True) -> Iterator[dict[str, Any]]:
        """The load on for the body (buffers and thread made at the first use); `on=False`: nothing,
        so a judge wraps every trial's call alike and only its loaded trials get the load."""
        if not on:
            yield {}
            return
        if self._thread is None:
            self._start()
        start = self.iterations
        self._go.set()
        if not self._busy.wait(PAUSE_TIMEOUT_S):
            raise LoadError(f"the GPU load did not start: {self._error or 'no answer'}")
        self._busy.clear()
        info: dict[str, Any] = {}
        try:
            yield info
        finally:
            self._go.clear()
            if not self._idle.wait(PAUSE_TIMEOUT_S) or self._error is not None:
                raise LoadError(f"the GPU load did not pause: {self._error or 'no answer'}")
            info["load_iterations"] = self.iterations - start

    def close(self) -> None:
        """Stop the thread and free the buffers (the judge calls this when correctness ends)."""
        if self._thread is not None:
            self._stop = True
            self._go.set()
            self._thread.join(PAUSE_TIMEOUT_S)
            self._thread = None
            del self._a, self._c, self._src, self._dst
            if self.cuda:
                torch.cuda.empty_cache()


class GpuLoads:
    """A GpuLoad on each of `devices` (once per distinct device), run together: a multi-GPU
    judge's trial spans several GPUs. `running()` reports the iterations of all of them."""

    def __init__(self, devices: list[str]) -> None:
        self.loads = [GpuLoad(device) for device in dict.fromkeys(devices)]

    @contextmanager
    def running(self, on: bool = True) -> Iterator[dict[str, Any]]:
        info: dict[str, Any] = {}
        with ExitStack() as stack:
            each = [stack.enter_context(load.running(on)) for load in self.loads]
            yield info
        if on:
            info["load_iterations"] = sum(i["load_iterations"] for i in each)

    def close(self) -> None:
        for load in self.loads:
            load.close()
