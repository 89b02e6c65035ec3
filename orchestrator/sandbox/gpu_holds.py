"""What a GPU measurement holds, in the one order that cannot deadlock.

Timing, ceilings and ncu must not share their GPUs with other work. Three holds, always taken
in this order: the executor's lease on the GPUs (when the sandbox is leased: other episodes of
this process), this host's lock files of those GPUs (other processes: every judge takes them
while it runs kernels), and the host's profiler lock (one profiled range at a time: a second ncu
profiling meanwhile is refused with "a driver resource was unavailable"). They are taken on the
host, so they hold for every sandbox backend; scoring's ncu in the local sandbox takes the last
two inside the profiled process instead (scoring/pipeline.py `_counters`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def measuring(sandbox: Any, profiler: bool = False, lock_files: bool = True) -> Iterator[None]:
    """`lock_files=False`: the process measured takes this host's GPU lock files itself, only
    around its kernels (the local sandbox reaches them; runner/profile_target.py), so its
    start-up overlaps other judges' trials instead of stopping them. The lease then holds only
    its busy accounting, not the GPUs alone: every kernel of a tool call in the local sandbox
    runs under the same lock files (a judge's trials, the disassemble probe; the profile and
    roofline tools measure through here), so they keep the profiled range alone, and other
    episodes' ncu runs start while this one's does."""
    gpus = tuple(getattr(getattr(sandbox, "spec", None), "gpus", ()) or ())
    if not gpus:
        yield
        return
    from orchestrator.runner.judge import gpu_lock, host_gpu_lock_paths, profiler_lock

    with contextlib.ExitStack() as stack:
        lease = getattr(sandbox, "measuring", None)
        if callable(lease):
            stack.enter_context(lease(alone=lock_files))
        if lock_files:
            stack.enter_context(gpu_lock(host_gpu_lock_paths(gpus)))
        if profiler:
            stack.enter_context(profiler_lock())
        yield
