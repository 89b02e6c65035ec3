"""Runs INSIDE the episode's sandbox for the specs, profile, disassemble and roofline tools.

Copied into the sandbox's working directory as `popcorn_probe.py` next to
`problem/manifest.json`, `problem/reference.py` and `candidate.py`; it needs the
standard library, torch and `orchestrator.runner` only. It prints one JSON object on
stdout (except `run`, which only runs the candidate, for ncu to watch).

    python3 popcorn_probe.py specs
    python3 popcorn_probe.py ceilings
    python3 popcorn_probe.py time [--iters N]
    python3 popcorn_probe.py run [--iters N]        # profiled region: cudaProfilerStart/Stop
    python3 popcorn_probe.py kernels                # compiled kernel files the candidate left
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent

try:  # the L2 ceiling's kernel; Triton's JIT wants it at module level
    import triton
    import triton.language as tl
except ImportError:  # a sandbox without Triton measures L2 with a plain reduction
    triton = None

if triton is not None:
    @triton.jit
    def _l2_read(x, out, n, REPEAT: tl.constexpr, BLOCK: tl.constexpr):
        pid, step = tl.program_id(0), tl.num_programs(0) * BLOCK
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for _ in range(REPEAT):
            for start in range(pid * BLOCK, n, step):
                acc += tl.load(x + start + tl.arange(0, BLOCK), cache_modifier=".cg")
        tl.store(out + pid * BLOCK + tl.arange(0, BLOCK), acc)


def _device() -> str:
    import torch

    forced = os.environ.get("POPCORN_DEVICE")
    if forced in ("cpu", "cuda"):
        return forced
    return "cuda" if torch.cuda.is_available() else "cpu"


def specs() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"device": _device(), "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if info["device"] == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update({
            "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
            "sms": p.multi_processor_count, "memory_bytes": p.total_memory,
            "l2_bytes": getattr(p, "L2_cache_size", None),
            "shared_memory_per_block_optin": getattr(p, "shared_memory_per_block_optin", None),
            "shared_memory_per_sm": getattr(p, "shared_memory_per_multiprocessor", None),
            "registers_per_sm": getattr(p, "regs_per_multiprocessor", None),
            "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", None),
            "warp_size": getattr(p, "warp_size", 32),
            "clock_khz": getattr(p, "clock_rate", None),
            "memory_clock_khz": getattr(p, "memory_clock_rate", None),
            "memory_bus_width": getattr(p, "memory_bus_width", None),
        })
    else:
        info.update({"name": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                     "torch_threads": torch.get_num_threads()})
    return info


def _times_s(fn: Callable[[], Any], iters: int, device: str) -> list[float]:
    import torch

    times = []
    for _ in range(iters):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return times


def _l2_gbps(n: int, reps: int, device: str) -> float:
    """L2 bandwidth: every program re-reads its slice of an L2-resident buffer (a quarter
    of L2) `repeat` times with loads that bypass L1 (.cg), in one kernel, so neither L1
    hits nor launch overhead enter the figure. On a CPU: a plain reduction."""
    import torch

    buf = torch.ones(n, device=device)
    if device != "cuda" or triton is None:
        best = min(_times_s(lambda: torch.sum(buf), reps, device))
        return round(n * 4 / best / 1e9, 1)
    block, repeat = 1024, 32
    n = n // block * block
    programs = torch.cuda.get_device_properties(0).multi_processor_count * 8
    sink = torch.empty(programs * block, device=device)
    run = lambda: _l2_read[(programs,)](buf, sink, n, REPEAT=repeat, BLOCK=block)  # noqa: E731
    run()
    best = min(_times_s(run, reps, device))
    return round(repeat * n * 4 / best / 1e9, 1)


def ceilings() -> dict[str, Any]:
    """ERT-style ceilings: the best of repeated copies and matmuls (not vendor numbers)."""
    import torch

    device = _device()
    out: dict[str, Any] = {"device": device, "name": specs()["name"], "method": "best of repeated runs"}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        dram_n, l2_n, mm_n, reps = 1 << 28, max(l2 // 16, 1 << 16), 8192, 20  # l2_n floats: a quarter of L2
    else:
        dram_n, l2_n, mm_n, reps = 1 << 24, 1 << 16, 512, 5
    # DRAM: a copy far larger than L2 reads n*4 bytes and writes n*4 bytes.
    src = torch.ones(dram_n, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(_times_s(lambda: dst.copy_(src), reps, device))
    out["dram_gbps"] = round(2 * dram_n * 4 / best / 1e9, 1)
    del src, dst
    out["l2_gbps"] = _l2_gbps(l2_n, reps, device)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    for key, dtype in (("fp32_tflops", torch.float32), ("tensor_bf16_tflops", torch.bfloat16)):
        if device == "cpu" and dtype == torch.bfloat16:
            continue
        a = torch.randn(mm_n, mm_n, device=device, dtype=dtype)
        b = torch.randn(mm_n, mm_n, device=device, dtype=dtype)
        torch.mm(a, b)
        best = min(_times_s(lambda: torch.mm(a, b), reps, device))
        out[key] = round(2 * mm_n ** 3 / best / 1e12, 3)
    return out


def _load() -> tuple[Any, Any, dict[str, Any], str]:
    sys.path.insert(0, str(HERE))
    from orchestrator.runner.problem import import_file, load_problem, to_device
    from orchestrator.runner.shapes import default_shape

    problem = load_problem(HERE / "problem")
    device = _device()
    shape = default_shape(problem.manifest["shapes"], device)
    candidate = import_file(HERE / "candidate.py", "popcorn_candidate")
    init = to_device(problem.init_inputs(shape), device)
    model = candidate.ModelNew(**init).to(device).eval()
    inputs = problem.inputs(shape, 12345, device)
    return model, inputs, shape, device


def time_candidate(iters: int) -> dict[str, Any]:
    import torch

    model, inputs, shape, device = _load()
    with torch.no_grad():
        model(*inputs)  # compile and warm up
        times = _times_s(lambda: model(*inputs), iters, device)
    return {"shape": shape, "device": device, "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3, "n": len(times)}


def run_candidate(iters: int) -> dict[str, Any]:
    import torch

    model, inputs, shape, device = _load()
    with torch.no_grad():
        model(*inputs)  # JIT compilation happens here, outside the profiled range
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        for _ in range(iters):
            model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    return {"shape": shape, "device": device}


def kernels() -> dict[str, Any]:
    """Run the candidate once, then list the compiled kernels it left behind. The run holds this
    host's GPU lock files shared where the sandbox reaches them (POPCORN_GPU_LOCK), like a
    judge's trial: another evaluation's timing or profiled range never overlaps it."""
    sys.path.insert(0, str(HERE))
    from orchestrator.runner.judge import gpu_lock

    with gpu_lock(os.environ.get("POPCORN_GPU_LOCK"), shared=True):
        run_candidate(1)
    found: dict[str, list[str]] = {"cubin": [], "ptx": [], "so": []}
    for root in (os.environ.get("TRITON_CACHE_DIR", ""), os.environ.get("TORCH_EXTENSIONS_DIR", "")):
        if not root:
            continue
        for ext in found:
            found[ext] += sorted(glob.glob(os.path.join(root, "**", f"*.{ext}"), recursive=True))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["specs", "ceilings", "time", "run", "kernels"])
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    if args.command == "specs":
        result = specs()
    elif args.command == "ceilings":
        result = ceilings()
    elif args.command == "time":
        result = time_candidate(args.iters)
    elif args.command == "run":
        result = run_candidate(args.iters)
    else:
        result = kernels()
    print("POPCORN_PROBE " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
