"""How many tensor operations does a problem's reference make per call at its default (H200)
shape? Counted on the CPU, with a dispatch mode, so no GPU is needed; views and allocations are
not counted, since they launch no kernel. Divided into the reference's H200 time, it gives the
microseconds per operation: a torch launch costs several, so references near 10 µs per operation
are likely launch-bound (scripts/gpu/launch_bound.py measures that on the GPU).

    python3 scripts/reference_ops.py PROBLEM_DIR      # one JSON line: ops, cpu_s, the commonest ops

A reference whose default shape takes long on the CPU is best run under `timeout`.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.runner.problem import load_problem  # noqa: E402
from orchestrator.runner.shapes import default_shape  # noqa: E402

NO_KERNEL = {"view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze",
             "select", "slice", "as_strided", "alias", "detach", "unbind", "split", "split_with_sizes", "chunk",
             "narrow", "diagonal", "lift_fresh", "empty", "empty_like", "empty_strided", "new_empty",
             "_reshape_alias", "expand_as", "view_as", "movedim", "flatten", "unflatten", "sym_size", "stride",
             "size", "dim", "numel", "is_same_size"}


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL:
            self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def count(problem_dir: Path) -> dict:
    problem = load_problem(problem_dir)
    shape = default_shape(problem.manifest["shapes"], "cuda")
    model, inputs = problem.model(shape, "cpu"), problem.inputs(shape, 0, "cpu")
    t0 = time.perf_counter()
    with torch.no_grad(), OpCounter() as counter:
        model(*inputs)
    ops = sum(counter.counts.values())
    ms = problem.manifest.get("reference_h200_ms")
    return {"problem": str(problem_dir.relative_to(REPO / "problems")) if problem_dir.is_absolute() else str(problem_dir),
            "shape": shape, "ops": ops, "cpu_s": round(time.perf_counter() - t0, 1),
            "us_per_op_h200": round(ms * 1e3 / ops, 1) if ms and ops else None,
            "commonest": sorted(counter.counts.items(), key=lambda kv: -kv[1])[:5]}


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(json.dumps(count(Path(sys.argv[1]).resolve())))
