"""Does tr-fa2-bwd's source fix remove the wrong-dQ patches of CUTLASS example 88's backward?

The fix (the cutlass42 pin's `fixes` in the task's manifest) makes the dQ reducer warp wait for
every TMA reduce-add's shared-memory reads before it releases the stage (docs/decisions.md,
"Source fixes"). The race it closes needs a reduce-add slower to read its buffer than the MMA
warpgroups' next tile: the twentieth session saw it in 34 % of back-to-back calls on a quiet H100,
72 % beside another process's load. So this script builds the H100 reference twice, with the fix
and without it, starts a process that loads the GPU (fp32 matmuls and 2 GiB copies, as the
judge's fp32 reference and other lanes do in a real run), and calls each library for SECONDS
on one input set at the disclosed shape, each in a process of its own (two builds of the same
CUTLASS templates in one process share symbols). Every call's dQ is checked against the fp32
reference with the task's tolerance; a failure prints its first places (batch, seq, head,
dim): the race puts its patch at the end of a 64x128 tile. Writes $OUT/fa2_bwd_race_<load>.json.

With `--load thread` the load is the judge's own (runner/gpuload.py: a thread of the calling
process, on a stream of its own), to compare the two; `--load none` has none.

    OUT=... python3 scripts/gpu/fa2_bwd_race.py [--seconds 45] [--load process|thread|none] [--only upstream]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

TASK = "tr-fa2-bwd"
PINS = os.environ.get("POPCORN_TRANSLATION_PINS", ".carry/translation-pins")
LOAD = """
import torch
a = torch.randn(8192, 8192, device="cuda"); b = torch.empty(512 << 20, device="cuda"); c = torch.empty_like(b)
while True:
    a @ a; c.copy_(b)
"""


def build_both() -> dict[str, str]:
    """The H100 reference's library with the source fix and without it."""
    from orchestrator.config import Settings
    from orchestrator.translation import builds, sources
    from orchestrator.translation.catalog import Task, find_task

    settings = Settings()
    fixed = find_task(TASK, settings.translation_dir)
    upstream = Task(fixed.path, copy.deepcopy(fixed.manifest))
    for pin in upstream.manifest["pins"].values():
        pin.pop("fixes", None)

    # unpacked one after the other (both share the flash_attn pin), built side by side
    roots = [sources.prepare(t.manifest, settings.cache_dir, [Path(PINS)], offline=True) for t in (fixed, upstream)]
    with ThreadPoolExecutor(2) as pool:
        built = pool.map(lambda t, r: str(builds.build(t, "h100", r, settings.cache_dir).library),
                         (fixed, upstream), roots)
        return dict(zip(("fixed", "upstream"), built))


def call_for(library: str, seconds: float, thread_load: bool) -> dict:
    """In this process: call `library` for `seconds` on one input set; count calls outside tolerance."""
    import torch

    from orchestrator.runner.gpuload import GpuLoad
    from orchestrator.runner.problem import import_file
    from orchestrator.runner.shapes import default_shape
    from orchestrator.translation.catalog import find_task
    from orchestrator.translation.libworker import load_entry

    task = find_task(TASK, REPO / "translation")
    glue = import_file(task.path / "task.py", "popcorn_race_glue")
    entry = load_entry(library, task.manifest["entry"]["symbol"], glue.ARGTYPES)
    shape = default_shape(task.manifest["shapes"], "cuda")  # the disclosed shape
    inputs = glue.get_inputs(shape, torch.Generator().manual_seed(5), "cuda")
    ref, tol = glue.reference(inputs)[0].float(), task.manifest["tolerance"]
    calls, failed, end = 0, [], time.time() + seconds
    load = GpuLoad("cuda:0")
    with load.running(on=thread_load) as info:
        while time.time() < end:
            fresh = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)
            dq = glue.launch(entry, fresh, torch.cuda.current_stream().cuda_stream)[0].float()
            bad = ((dq - ref).abs() > tol["atol"] + tol["rtol"] * ref.abs()).nonzero()
            calls += 1
            if len(bad):
                failed.append(bad[:4].tolist())
    load.close()
    return {"library": library, "shape": shape, "calls": calls, "failed_calls": len(failed),
            "load_iterations": info.get("load_iterations"), "first_failures": failed[:20]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=45, help="calls per library, in seconds")
    parser.add_argument("--load", choices=("process", "thread", "none"), default="process",
                        help="what loads the GPU meanwhile: another process (default), a thread of the calling "
                             "process as in the judge's loaded trials, or nothing")
    parser.add_argument("--only", choices=("fixed", "upstream"), help="call this build only")
    parser.add_argument("--child", metavar="LIBRARY", help=argparse.SUPPRESS)  # one library's process
    args = parser.parse_args()
    if args.child:
        print(json.dumps(call_for(args.child, args.seconds, args.load == "thread")), flush=True)
        return 0
    t0 = time.time()
    libraries = {k: v for k, v in build_both().items() if args.only in (None, k)}
    report: dict = {"task": TASK, "build_s": round(time.time() - t0, 1), "load": args.load}
    load = subprocess.Popen([sys.executable, "-c", LOAD]) if args.load == "process" else None
    try:
        for name, library in libraries.items():
            child = subprocess.run([sys.executable, __file__, "--child", library, "--seconds", str(args.seconds),
                                    "--load", args.load],
                                   capture_output=True, text=True, timeout=args.seconds + 300)
            lines = child.stdout.strip().splitlines()
            report[name] = json.loads(lines[-1]) if child.returncode == 0 and lines else {
                "rc": child.returncode, "stderr": child.stderr[-2000:]}
            print(name, args.load, {k: report[name].get(k) for k in ("calls", "failed_calls", "load_iterations", "rc")},
                  flush=True)
    finally:
        if load is not None:
            load.kill()
    (Path(os.environ.get("OUT", ".")) / f"fa2_bwd_race_{args.load}.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
