"""Hardware counters of the final kernel(s) (rule 7): ncu at the disclosed shape.

SOL (the larger of SM and memory throughput, % of peak), DRAM throughput and
tensor-pipe use, each averaged over the candidate's kernels weighted by their
duration. A claimed speedup of 1.5x or more from kernels that keep both the SMs and
memory under 1 % busy is flagged (`counters:idle_speedup`): such a kernel does too
little work to be computing the answer. A timed median under half the kernel time ncu
measured is flagged too (`counters:time_below_kernels`, TIME_FLOOR).

ncu replays every profiled launch many times, so a forward of hundreds of launches (a
time-stepping loop) held the GPU alone for minutes (fourteenth session: 424 launches, 193 s):
at most `max_launches` launches of each launch configuration (kernel, grid, block, shared
memory) are profiled. Every distinct kernel is still seen; a loop's repeats are sampled.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
from typing import Any

from orchestrator.sandbox.base import Sandbox

METRICS = {
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}
TENSOR = ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active")
DURATION = "gpu__time_duration.sum"
IDLE_PCT, SUSPICIOUS_SPEEDUP = 1.0, 1.5
# A candidate's timed median below this share of the kernel time ncu sums over one forward is
# flagged (`counters:time_below_kernels`). The timing is measured and reported by the candidate's
# own process, which native code could forge (docs/decisions.md); ncu sees its kernels from
# outside. The eighteenth session's 33 oracles (H100) read 0.96x to 124x (a sampled loop sums
# few launches). Kernels overlapped on side streams can honestly read below 1, so this is a flag
# for review, not a failure.
TIME_FLOOR = 0.5
# what ncu prints when the driver will not open another profiling session now
SESSION_REFUSED = ("driver resource was unavailable", "already being profiled")


def find_ncu() -> str | None:
    for candidate in ("ncu", "/usr/local/cuda/bin/ncu"):
        path = shutil.which(candidate)
        if path:
            return path
    return None


def parse_raw_csv(text: str) -> list[dict[str, float]]:
    """`ncu --csv --page raw`: a header of metric names, a row of units, a row per kernel."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    kernels = []
    for row in rows[2:]:
        values = {}
        for name, value in zip(header, row):
            try:
                values[name] = float(value.replace(",", ""))
            except ValueError:
                continue
        if DURATION in values:
            kernels.append(values)
    return kernels


_PROFILED = re.compile(r"profiled range ([0-9.]+) s, after ([0-9.]+) s waiting")


def profiled_range(text: str) -> dict[str, float]:
    """The profiled range's wall time (the GPU held alone, ncu's replays included) and the wait
    for it, as runner/profile_target.py prints them; {} when it did not say."""
    found = _PROFILED.findall(text)
    return {"profiled_s": float(found[-1][0]), "profiled_lock_wait_s": float(found[-1][1])} if found else {}


def summarize(kernels: list[dict[str, float]], max_launches: int | None = None) -> dict[str, Any]:
    """`max_launches`: the per-configuration cap ncu ran with (recorded; kernel_time_ms then sums
    the profiled launches only, not a whole forward)."""
    total = sum(k[DURATION] for k in kernels) or 1.0

    def weighted(metric: str) -> float | None:
        have = [k for k in kernels if metric in k]
        return sum(k[metric] * k[DURATION] for k in have) / total if have else None

    out: dict[str, Any] = {"status": "passed", "kernels": len(kernels)}
    for key, metric in METRICS.items():
        value = weighted(metric)
        if value is not None:
            out[key] = value
    tensor = [v for v in (weighted(m) for m in TENSOR) if v is not None]
    if tensor:
        out["tensor_pipe_pct"] = max(tensor)
    out["sol_pct"] = max(out.get("sm_throughput_pct", 0.0), out.get("memory_throughput_pct", 0.0))
    out["metrics"] = {"kernel_time_ms": total / 1e6}
    if max_launches:
        out["max_launches_per_config"] = max_launches
    return out


def profile_job(problem_dir: str, solution: str, gpu_lock: str | None = None,
                profiler_lock: bool = False) -> dict[str, Any]:
    """What runner/profile_target.py reads on stdin (`profiler_lock`: it takes the host's
    profiler lock itself, around its profiled range only)."""
    return {"problem_dir": problem_dir, "solution": solution, "iters": 1, "gpu_lock": gpu_lock,
            "profiler_lock": profiler_lock}


def profile_argv(ncu: str, python: str, extra_metrics: tuple[str, ...] = TENSOR,
                 max_launches: int | None = None) -> list[str]:
    """ncu around runner/profile_target.py: raw CSV of the metrics, the profiled range only, at most
    `max_launches` launches of each launch configuration (None: every launch)."""
    metrics = ",".join([*METRICS.values(), DURATION, *extra_metrics])
    cap = ["--filter-mode", "per-launch-config", "--launch-count", str(max_launches)] if max_launches else []
    return [ncu, "--csv", "--page", "raw", "--profile-from-start", "off", "--clock-control", "none", *cap,
            "--target-processes", "all", "--metrics", metrics, python, "-m", "orchestrator.runner.profile_target"]


def collect(sandbox: Sandbox, problem_dir: str, solution: str, timeout_s: float = 300,
            gpu_lock: str | None = None, profiler_lock: bool = False,
            max_launches: int | None = None) -> dict[str, Any]:
    """`gpu_lock`: the host's GPU lock files, for the profiled process to take itself (None: the
    caller holds the GPUs); `profiler_lock`: the profiled process takes the host's profiler lock
    itself, around its profiled range (otherwise the caller holds it for the whole ncu run);
    `max_launches`: profile_argv's cap."""
    ncu = find_ncu() if sandbox.name == "local" else "ncu"
    if ncu is None:
        return {"status": "skipped", "reason": "Nsight Compute (ncu) is not installed"}
    job = json.dumps(profile_job(problem_dir, solution, gpu_lock, profiler_lock)).encode()
    text = ""
    attempts = [(TENSOR, max_launches), ((), max_launches)]
    while attempts:
        extra, cap = attempts.pop(0)
        result = sandbox.exec(profile_argv(ncu, sandbox.python, extra, cap), timeout_s=timeout_s, stdin=job)
        text = result.stdout + result.stderr
        if "ERR_NVGPUCTRPERM" in text:
            return {"status": "skipped", "reason": "the host restricts GPU performance counters (ERR_NVGPUCTRPERM)"}
        kernels = parse_raw_csv(result.stdout)
        if kernels:
            out = {**summarize(kernels, cap), **profiled_range(text)}
            if cap != max_launches:
                out["launch_cap"] = "refused by this ncu: every launch profiled"
            return out
        if cap and not attempts and any(option in text for option in ("filter-mode", "launch-count")):
            attempts.append(((), None))  # an ncu without the filter options: profile every launch
    return {"status": "error", "reason": text[-1500:]}


def refused_session(counters: dict[str, Any]) -> bool:
    """Whether a counters run failed because another profiling session was open."""
    return counters.get("status") == "error" and any(e in counters.get("reason", "") for e in SESSION_REFUSED)


def flags(counters: dict[str, Any], speedup: float | None, candidate_ms: float | None = None) -> list[str]:
    """What the counters say against a passing candidate's claimed speedup and timed median."""
    if counters.get("status") != "passed" or speedup is None:
        return []
    out = []
    busy = max(counters.get("sm_throughput_pct", 100.0), counters.get("dram_throughput_pct", 100.0),
               counters.get("memory_throughput_pct", 100.0))
    if speedup >= SUSPICIOUS_SPEEDUP and busy < IDLE_PCT:
        out.append("counters:idle_speedup")
    kernel_ms = (counters.get("metrics") or {}).get("kernel_time_ms")
    if candidate_ms is not None and kernel_ms and candidate_ms < TIME_FLOOR * kernel_ms:
        out.append("counters:time_below_kernels")
    return out
