"""Is a problem's reference launch-bound at its default shape? (issues 2 and 5: default shapes
must keep the GPU busy, not the host's launch path)

For every single-GPU problem (or those matching the glob arguments), in its own process with a
time limit, at the default shape on the GPU:
- `median_ms`: the harness's time of one call (timing.time_calls, one call per region);
- `gpu_busy_ms`: the union of the GPU's kernel, copy and set intervals during one call, from
  torch.profiler (CUPTI's device timestamps), and `kernels`, how many ran;
- `busy_fraction` = gpu_busy_ms / median_ms. Below BUSY_MIN (0.5) the GPU idles more than half of
  the call waiting for the host: the reference is launch-bound, its time follows the host's
  speed and load, and a fused kernel beats it by the launch overhead rather than by its work
  (hmc_leapfrog's oracle scored 1.05x beside busy lanes and 0.70x on a quiet host, ninth session).

    OUT=... [SHARD=0/2] [PROBLEM_S=90] [DEVICE=cuda] python3 scripts/gpu/launch_bound.py [GLOB[@K=V,K=V]...]

A `@` suffix measures that problem at its default shape with these dimensions changed instead
(a candidate default for a launch-bound reference: more work per kernel, fewer steps), e.g.
probability/l2/mala_sampler@chains=32768,steps=50; the same problem may be named several times.

Writes $OUT/launch_bound.jsonl (a row per problem) and prints a table. Run on two GPUs as two
processes: CUDA_VISIBLE_DEVICES=0 SHARD=0/2 ... & CUDA_VISIBLE_DEVICES=1 SHARD=1/2 ... & wait.
"""
from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.executors.gpus import merged_length  # noqa: E402  (kernels of several streams can overlap)

BUSY_MIN = 0.5


def verdict(busy_fraction: float) -> str:
    return "launch-bound" if busy_fraction < BUSY_MIN else "gpu-bound"


def measure(problem_dir: str, device: str = "cuda", changes: dict | None = None) -> dict:
    """One problem's row (runs in the child process). On a CPU (tests) there are no device
    intervals: the row says only that the plumbing works."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from orchestrator.runner.problem import load_problem
    from orchestrator.runner.shapes import default_shape
    from orchestrator.runner.timing import stats, time_calls

    problem = load_problem(Path(problem_dir))
    cuda = device == "cuda"
    shape = {**default_shape(problem.manifest["shapes"], device), **(changes or {})}
    model = problem.model(shape, device)
    inputs = problem.inputs(shape, 0, device)
    with torch.no_grad():
        timed = time_calls(model, [inputs], device, iters=10 if cuda else 2, warmup=2 if cuda else 1, hold_bytes=0)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    device_events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy_ms = merged_length([(e.time_range.start, e.time_range.end) for e in device_events]) / 1e3
    median = stats(timed["times_ms"])["median_ms"]
    fraction = busy_ms / median if median > 0 else 0.0
    return {"shape": shape, "median_ms": median, "gpu_busy_ms": busy_ms, "busy_fraction": fraction,
            "kernels": len(device_events), "verdict": verdict(fraction)}


def shape_changes(text: str) -> dict:
    """'chains=32768,steps=50' -> {'chains': 32768, 'steps': 50} (numbers as JSON reads them)."""
    pairs = (item.split("=", 1) for item in text.split(",") if item)
    return {key: json.loads(value) for key, value in pairs}


def problems(args: list[str]) -> list[tuple]:
    """(entry, shape changes) for every argument, in catalog order; no argument: every problem."""
    from orchestrator.catalog import load_catalog, select
    from orchestrator.config import Settings

    entries = select(load_catalog(Settings()), track="subdomain", single_gpu=True)
    wanted = [(glob, shape_changes(changes)) for glob, _, changes in (a.partition("@") for a in args)] or [("*", {})]
    picked = [(e, changes) for glob, changes in wanted for e in entries if fnmatch.fnmatch(e.id, glob)]
    index, count = (int(x) for x in os.environ.get("SHARD", "0/1").split("/"))
    return picked[index::count]


def main(argv: list[str]) -> int:
    if argv[:1] == ["one"]:
        print(json.dumps(measure(argv[1], os.environ.get("DEVICE", "cuda"), json.loads(argv[2]))))
        return 0
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    limit = float(os.environ.get("PROBLEM_S", "90"))
    for entry, changes in problems(argv):
        t0 = time.perf_counter()
        try:
            res = subprocess.run([sys.executable, __file__, "one", str(entry.path), json.dumps(changes)],
                                 capture_output=True, text=True,
                                 cwd=REPO, timeout=limit)
            row = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {"error": res.stderr[-600:]}
        except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            row = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        row = {"problem": entry.id, "changes": changes, "wall_s": round(time.perf_counter() - t0, 1), **row}
        with open(out / "launch_bound.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        label = entry.id + ("@" + ",".join(f"{k}={v}" for k, v in changes.items()) if changes else "")
        print(f"{label:55s} " + (f"{row['median_ms']:9.3f} ms  busy {row['busy_fraction']:6.1%}  "
                                    f"{row['kernels']:6d} kernels  {row['verdict']}" if "error" not in row
                                    else "error: " + row["error"][-200:].replace("\n", " ")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
