"""What ncu watches when scoring collects counters (rule 7).

`python -m orchestrator.runner.profile_target` reads {problem_dir, solution, iters} on
stdin, builds the candidate at the disclosed shape, warms it up outside the profiled
range, then runs `iters` forwards between cudaProfilerStart and cudaProfilerStop (ncu is
started with --profile-from-start off). With `gpu_lock` (the host's GPU lock files) it holds
them shared while it builds and warms up, like a judge's trial, and alone while profiled,
like a timing: its start-up then overlaps other judges' trials, its counters nothing. With
`profiler_lock` it also takes the host's profiler lock there, after the lock files (the order of
sandbox/gpu_holds.py), so concurrent ncu sessions queue only for their profiled ranges.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time

import torch

from orchestrator.runner.judge import gpu_lock, profiler_lock, progress
from orchestrator.runner.problem import import_file, load_problem, to_device
from orchestrator.runner.shapes import default_shape

PROFILED_LINE = "profiled range {seconds:.3f} s, after {waited:.3f} s waiting for the GPU and profiler locks"


def main() -> int:
    job = json.loads(sys.stdin.read())
    lock, device = job.get("gpu_lock"), job.get("device", "cuda")  # "cpu": the lock's tests
    cuda = device == "cuda"
    problem = load_problem(job["problem_dir"])
    shape = default_shape(problem.manifest["shapes"], device)
    cls = import_file(job["solution"], "popcorn_candidate").ModelNew
    with torch.no_grad():
        with gpu_lock(lock, shared=True):
            progress("warm-up")
            model = cls(**to_device(problem.init_inputs(shape), device)).to(device).eval()
            inputs = problem.inputs(shape, 12345, device)
            for _ in range(2):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
        t0 = time.perf_counter()
        with gpu_lock(lock), (profiler_lock() if job.get("profiler_lock") else contextlib.nullcontext()):
            t1 = time.perf_counter()
            progress("profiled")
            if cuda:
                torch.cuda.cudart().cudaProfilerStart()
            for _ in range(int(job.get("iters", 1))):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
            # how long the GPU was this range's alone (ncu's replays included): scoring records it
            progress(PROFILED_LINE.format(seconds=time.perf_counter() - t1, waited=t1 - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
