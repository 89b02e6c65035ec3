"""Replay a recorded pass's demands on the host's GPU lock, with sleeps in place of GPU work.

Each episode of a pass's rows (docs/verification-data/*-pass.jsonl, written by
scripts/gpu/pass_summary.py) becomes a thread that holds the lock as its judge did: the load
and every correctness and stress trial shared, the timing alone, then ncu's profiled range
alone, with the episode's other time (sandbox, agent, ncu's start-up) between them without the
lock. The holds are the recorded stage times less their waits, so what the replay adds back is
the waiting that the lock itself causes with `--parallel` episodes at a time. It answers
what-ifs on the GPU's time alone without a GPU: `--timing-scale` and `--ncu-scale` shrink the
exclusive holds, and `--lock turnstile` replays the lock's earlier rule beside today's. A sleep
does not slow its neighbours as GPU work does, so the wall times are lower than a real pass's;
compare them with each other.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from orchestrator.config import Settings  # noqa: E402
from orchestrator.runner.judge import gpu_lock, plain_trial_count  # noqa: E402

NEEDED = ("started_at", "episode_wall_s", "stage_wall_s", "stage_lock_wait_s")  # what a replay reads of a row
# shared holds per stage at the default settings
TRIALS = {"correctness": plain_trial_count({"trials": Settings().trials}), "stress": Settings().stress}


# the rule scoring uses, and the turnstile before the sixteenth session (a writer held the gate
# alone, so trials that queued during one timing went in before a timing that came later)
LOCKS = {"judge": lambda path, shared: gpu_lock(path, shared=shared),
         "turnstile": lambda path, shared: gpu_lock(path, shared=shared, writers_together=False)}


def episode_plan(row: dict[str, Any], timing_scale: float, ncu_scale: float) -> list[tuple[str, float]]:
    """(hold, seconds) steps of one episode: hold is "free", "shared" or "alone"."""
    wall, waits = row["stage_wall_s"], row["stage_lock_wait_s"]
    work = {name: max(0.0, wall.get(name, 0.0) - waits.get(name, 0.0)) for name in wall}
    setup = float(row.get("timing_setup_s") or 0.0)
    spans = row.get("gpu_spans") or []  # the scoring's hold, then the counters' (ncu's whole run)
    counters_span = spans[1][1] - spans[1][0] if len(spans) > 1 else 0.0
    profiled = float(row.get("ncu_profiled_s") or 0.0)
    ncu_free = max(0.0, counters_span - profiled - float(row.get("ncu_lock_wait_s") or 0.0))
    other = max(0.0, row["episode_wall_s"] - sum(wall.values()) - counters_span)
    steps: list[tuple[str, float]] = [("free", other), ("shared", work.get("load", 0.0))]
    for stage, n in TRIALS.items():
        steps += [("shared", work.get(stage, 0.0) / n)] * n
    steps += [("shared", setup), ("alone", (work.get("timing", 0.0) - setup) * timing_scale),
              ("free", ncu_free), ("alone", profiled * ncu_scale)]
    return [(hold, s) for hold, s in steps if s > 0]


def replay(rows: list[dict[str, Any]], parallel: int, scale: float, lock: str, timing_scale: float,
           ncu_scale: float) -> dict[str, float]:
    """Run every episode's plan, `parallel` at a time in the rows' start order; seconds unscaled."""
    take = LOCKS[lock]
    waited = {"shared": 0.0, "alone": 0.0}
    count = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "gpu0.lock")

        def run(row: dict[str, Any]) -> None:
            for hold, seconds in episode_plan(row, timing_scale, ncu_scale):
                if hold == "free":
                    time.sleep(seconds * scale)
                    continue
                t0 = time.perf_counter()
                with take(path, hold == "shared"):
                    with count:
                        waited[hold] += time.perf_counter() - t0
                    time.sleep(seconds * scale)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(run, sorted(rows, key=lambda r: r["started_at"])))
        wall = time.perf_counter() - t0
    return {"wall_s": wall / scale, "trials_waited_s": waited["shared"] / scale, "alone_waited_s": waited["alone"] / scale}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=Path, help="a pass's rows (docs/verification-data/*-pass.jsonl)")
    parser.add_argument("--parallel", type=int, default=6, help="episodes at a time (the pass's MAX_PARALLEL; default 6)")
    parser.add_argument("--scale", type=float, default=0.05, help="replay seconds per recorded second (default 0.05)")
    parser.add_argument("--lock", choices=sorted(LOCKS), action="append",
                        help="the lock's rule, repeatable (default: judge, the one scoring uses)")
    parser.add_argument("--timing-scale", type=float, action="append",
                        help="multiply each timing's time alone by this, repeatable (default 1)")
    parser.add_argument("--ncu-scale", type=float, action="append",
                        help="multiply each ncu profiled range by this, repeatable (default 1)")
    args = parser.parse_args()
    try:
        rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"error: {args.rows}: {exc}", file=sys.stderr)
        return 2
    lacking = [i + 1 for i, row in enumerate(rows) if not all(k in row for k in NEEDED)]
    if not rows or lacking:
        print(f"error: {args.rows}: not a pass's rows (line {lacking[0] if lacking else 1} lacks one of "
              f"{', '.join(NEEDED)})", file=sys.stderr)
        return 2
    table = []
    for lock in args.lock or ["judge"]:
        for timing_scale in args.timing_scale or [1.0]:
            for ncu_scale in args.ncu_scale or [1.0]:
                r = replay(rows, args.parallel, args.scale, lock, timing_scale, ncu_scale)
                table.append([lock, timing_scale, ncu_scale, f"{r['wall_s']:.0f}", f"{r['trials_waited_s']:.0f}",
                              f"{r['alone_waited_s']:.0f}"])
    print(f"{len(rows)} episodes of {args.rows.name}, {args.parallel} at a time, replayed at {args.scale}x")
    print(tabulate(table, headers=["lock", "timing alone x", "ncu x", "wall s", "trials waited s", "alone waited s"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
