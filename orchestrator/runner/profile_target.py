"""What ncu watches when scoring collects counters (rule 7).

`python -m orchestrator.runner.profile_target` reads {problem_dir, solution, iters} on
stdin, builds the candidate at the disclosed shape, warms it up outside the profiled
range, then runs `iters` forwards between cudaProfilerStart and cudaProfilerStop (ncu is
started with --profile-from-start off).
"""
from __future__ import annotations

import json
import sys

import torch

from orchestrator.runner.problem import import_file, load_problem, to_device
from orchestrator.runner.shapes import default_shape


def main() -> int:
    job = json.loads(sys.stdin.read())
    problem = load_problem(job["problem_dir"])
    shape = default_shape(problem.manifest["shapes"], "cuda")
    cls = import_file(job["solution"], "popcorn_candidate").ModelNew
    model = cls(**to_device(problem.init_inputs(shape), "cuda")).cuda().eval()
    inputs = problem.inputs(shape, 12345, "cuda")
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for _ in range(int(job.get("iters", 1))):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
