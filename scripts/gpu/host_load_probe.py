"""GPU probe (issue 5's pass): why do launch-heavy references read slower beside other episodes,
and what would keep their timing honest? In the passes of 2026-12-01, smith_waterman_score's
reference read 68 ms with judges one at a time and up to 105 ms beside three other episodes,
while references made of a few long kernels did not move: the GPU was the timing's alone, the
host was not.

This times two launch-heavy references (CUDA events around back-to-back calls, the median of
several regions) with the host quiet and under synthetic host load, and under two remedies.
Each condition runs in a fresh process: the fourteenth session's probe ran them in one, and the
timed process read 42 % slower quiet at the end than at the start, after the pinned condition
(likely, threads started while only its main thread was pinned kept CPU 0).
  quiet        nothing else running (before, between and after the loaded conditions)
  spin         N-4 processes in a pure-Python loop (the CPU busy, little memory traffic)
  mem          N-4 processes copying 64 MiB arrays (memory bandwidth and caches busy)
  mem-pinned   the same, the timed process (all its threads) on CPU 0 and the load on the others
  spin-2x      twice as many spinners as CPUs (the run queue oversubscribed)
  spin-2x-nice the same, the load at nice 19
Each row also gives the mean `cpu MHz` of /proc/cpuinfo while it ran (frequency scaling).
About two minutes on 16 CPUs.

    source scripts/gpu/env.sh && OUT=... python3 scripts/gpu/host_load_probe.py [PROBLEM_ID ...]

Writes $OUT/host_load.jsonl and prints one line per row.
"""
from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

PROBLEMS = ["biology/l1/smith_waterman_score", "biology/l2/profile_hmm_forward"]


def _die_with_parent(cpus: list[int] | None, nice: int) -> None:
    """A load process must not outlive the probe (a timeout kills it, and the pass runs next)."""
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    os.nice(nice)


def spin(cpus: list[int] | None, nice: int) -> None:
    _die_with_parent(cpus, nice)
    x = 0
    while True:
        x += 1


def copy_arrays(cpus: list[int] | None, nice: int) -> None:
    import numpy as np

    _die_with_parent(cpus, nice)
    a, b = np.ones(8 << 20), np.empty(8 << 20)
    while True:
        np.copyto(b, a)


def cpu_mhz() -> float | None:
    try:
        values = [float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz")]
    except OSError:
        return None
    return round(statistics.mean(values), 0) if values else None


def time_reference(model, inputs, device: str, regions: int = 7, calls: int = 3) -> float:
    """Median milliseconds per call over `regions` regions of `calls` back-to-back calls."""
    import torch

    per_call = []
    for _ in range(regions):
        if device == "cpu":  # DEVICE=cpu: a smoke test of this script on a machine without a GPU
            t0 = time.perf_counter()
            for _ in range(calls):
                model(*inputs)
            per_call.append((time.perf_counter() - t0) * 1e3 / calls)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            model(*inputs)
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return statistics.median(per_call)


CONDITIONS = ("quiet", "spin", "quiet", "mem", "mem-pinned", "quiet", "spin-2x", "spin-2x-nice", "quiet")


def load_for(condition: str, n: int) -> tuple:
    """(target, processes, their CPUs, their nice, the timed process's CPUs) of a condition."""
    k, others = max(1, n - 4), list(range(1, n))  # k: busy CPUs, some left idle
    return {"quiet": (None, 0, None, 0, None), "spin": (spin, k, None, 0, None), "mem": (copy_arrays, k, None, 0, None),
            "mem-pinned": (copy_arrays, k, others, 0, [0]), "spin-2x": (spin, 2 * n, None, 0, None),
            "spin-2x-nice": (spin, 2 * n, None, 19, None)}[condition]


def measure(condition: str, problems: list[str]) -> int:
    """One condition in this (fresh) process: its affinity is set before CUDA starts any thread,
    so every thread of the timed process has it, and nothing of it outlives the condition."""
    n = os.cpu_count() or 2
    target, count, load_cpus, nice, timed_cpus = load_for(condition, n)
    if timed_cpus:
        os.sched_setaffinity(0, timed_cpus)
    import torch

    from orchestrator.runner.problem import load_problem
    from orchestrator.runner.shapes import default_shape

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # `timeout`: stop the load on the way out
    device = os.environ.get("DEVICE", "cuda")
    out = Path(os.environ.get("OUT", "/tmp/out"))
    refs = []
    with torch.no_grad():
        for pid in problems:
            problem = load_problem(REPO / "problems" / pid)
            shape = default_shape(problem.manifest["shapes"], device)
            model, inputs = problem.model(shape, device), problem.inputs(shape, 7, device)
            for _ in range(3):
                model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            refs.append((pid, model, inputs))
        load = [mp.get_context("fork").Process(target=target, args=(load_cpus, nice), daemon=True)
                for _ in range(count if target else 0)]
        for p in load:
            p.start()
        try:
            time.sleep(1.0 if load else 0.0)  # let the load settle
            mhz = cpu_mhz()
            for pid, model, inputs in refs:
                ms = time_reference(model, inputs, device)
                row = {"condition": condition, "problem": pid, "median_ms": round(ms, 3), "cpu_mhz": mhz,
                       "load_processes": len(load), "cpus": n, "timed_cpus": timed_cpus}
                with open(out / "host_load.jsonl", "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{condition:14s} {pid:40s} {ms:8.2f} ms  {mhz} MHz", flush=True)
        finally:
            for p in load:
                p.kill()
            for p in load:
                p.join()
    return 0


def main(argv: list[str]) -> int:
    """Each condition in a process of its own, quiet ones between the loaded ones (drift shows)."""
    if argv[:1] == ["--condition"]:
        return measure(argv[1], argv[2:] or PROBLEMS)
    Path(os.environ.get("OUT", "/tmp/out")).mkdir(parents=True, exist_ok=True)
    for condition in CONDITIONS:
        done = subprocess.run([sys.executable, __file__, "--condition", condition, *argv])
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
