"""Where do the repeat runs' two levels come from? (issue 2; a `script:` lane of batch_lanes.sh)

In the eighth session smith_waterman_score's oracle timed at about 6.14 ms or about 6.30 ms
(+2.6 %), staying at one level for 1-4 s, with clocks at 1,980 MHz and no throttle reason. A
region opens on an idle GPU, so a region's time also holds the host's launch of its first call:
a slow host (a CPU frequency state, a busy core) would show as a slow level. This probe times
the oracle for PROBE_S seconds (default 60) at its default shape, every region as the harness
times it, and records per region:
- `event_ms`: the CUDA events around the region (what the harness reports);
- `launch_ms`: host time from the start event's record to the call's return (the launch path);
- `behind_ms`: the events around a second call launched while the first still runs (its launch
  is hidden, so this is the kernel alone);
- `harness_ms`: the harness's own region (timing._cuda_region: since the ninth session the
  start event waits behind a lead, so the first launch is hidden);
- the SM clock (`torch.cuda.clock_rate`, when the driver reports it) every 200 regions.
Writes $OUT/levels_probe.json with every sample and a summary: the two levels, and whether
launch_ms or behind_ms moves with them.

    OUT=... PROBE_S=60 python3 scripts/gpu/levels_probe.py [PROBLEM_ID]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.runner import timing  # noqa: E402
from orchestrator.runner.problem import import_file, load_problem  # noqa: E402
from orchestrator.runner.shapes import default_shape  # noqa: E402

PROBLEM = sys.argv[1] if len(sys.argv) > 1 else "biology/l1/smith_waterman_score"


def oracle(problem, shape):
    module = import_file(problem.directory / "solutions" / "oracle.py", "popcorn_probe_oracle")
    return module.ModelNew(**problem.init_inputs(shape)).cuda()


def regions(model, inputs, flush, seconds: float) -> list[dict]:
    rows = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        a, b = timing._fresh_copy(inputs), timing._fresh_copy(inputs)
        flush()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter_ns()
        start.record()
        model(*a)
        t1 = time.perf_counter_ns()
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        # the same call again, launched while a first one still runs: the launch path is hidden
        flush()
        torch.cuda.synchronize()
        s2, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        model(*timing._fresh_copy(inputs))
        s2.record()
        model(*b)
        e2.record()
        torch.cuda.synchronize()
        harness_ms = timing._cuda_region(model, timing._fresh_copy(inputs), flush)[0]
        rows.append({"t": round(time.monotonic(), 4), "event_ms": start.elapsed_time(end),
                     "launch_ms": (t1 - t0) / 1e6, "behind_ms": s2.elapsed_time(e2), "harness_ms": harness_ms})
        if len(rows) % 200 == 1:
            rows[-1]["clock_mhz"] = _clock_mhz()
    return rows


def _clock_mhz() -> int | None:
    try:  # torch.cuda.clock_rate needs pynvml
        return int(torch.cuda.clock_rate())
    except Exception:
        return None


def split_levels(values: list[float]) -> tuple[float, float]:
    """The two levels as the medians below and above the midpoint of the 5th and 95th percentiles."""
    ordered = sorted(values)
    mid = (ordered[len(ordered) // 20] + ordered[(19 * len(ordered)) // 20]) / 2
    low = [v for v in values if v <= mid]
    high = [v for v in values if v > mid]
    return statistics.median(low), statistics.median(high) if high else float("nan")


def main() -> int:
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds = float(os.environ.get("PROBE_S", "60"))
    problem = load_problem(REPO / "problems" / PROBLEM)
    shape = default_shape(problem.manifest["shapes"])
    model = oracle(problem, shape)
    inputs = problem.inputs(shape, 1, "cuda")
    flush = timing.L2Flusher(torch.device("cuda"))
    with torch.no_grad():
        for _ in range(3):
            model(*timing._fresh_copy(inputs))
        rows = regions(model, inputs, flush, seconds)
    events = [r["event_ms"] for r in rows]
    low, high = split_levels(events)
    slow = [r for r in rows if r["event_ms"] > (low + high) / 2]
    fast = [r for r in rows if r["event_ms"] <= (low + high) / 2]

    def med(rs, key):
        return statistics.median(r[key] for r in rs) if rs else None

    summary = {"problem": PROBLEM, "shape": shape, "regions": len(rows), "seconds": seconds,
               "event_levels_ms": [low, high], "slow_fraction": len(slow) / len(rows),
               "launch_ms": {"fast": med(fast, "launch_ms"), "slow": med(slow, "launch_ms")},
               "behind_ms": {"fast": med(fast, "behind_ms"), "slow": med(slow, "behind_ms")},
               "harness_ms": {"fast": med(fast, "harness_ms"), "slow": med(slow, "harness_ms")},
               "cv": {key: statistics.pstdev(r[key] for r in rows) / statistics.fmean(r[key] for r in rows)
                      for key in ("event_ms", "behind_ms", "harness_ms")}}
    (out_dir / "levels_probe.json").write_text(json.dumps({"summary": summary, "rows": rows}))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
