"""GPU probe (issue 5's pass): may two ncu sessions start at once, if their profiled ranges never
overlap? Scoring's counters hold the host's profiler lock for a whole ncu run, about 20 s, of
which the profiled range is a small part; the eleventh session's one-GPU pass queued 34 of them
one after another. runner/profile_target.py already takes the host's GPU lock files alone around
its profiled range, so overlapping start-ups would only need the profiler lock moved there too,
if the driver allows a second profiling session to start while one is open.

For N = 1, 2 and 3 this starts N ncu runs of one oracle at once (no profiler lock; the GPU lock
file keeps their profiled ranges apart) and records each run's wall time, exit code, kernels
parsed and whether ncu reported an unavailable driver resource. About a minute.

    source scripts/gpu/env.sh && OUT=... python3 scripts/gpu/ncu_overlap_probe.py [PROBLEM_ID]

Writes $OUT/ncu_overlap.jsonl and prints one line per run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.scoring.counters import SESSION_REFUSED, find_ncu, parse_raw_csv, profile_argv, profile_job  # noqa: E402

RESOURCE_ERRORS = (*SESSION_REFUSED, "ERR_NVGPUCTRPERM")


def start(ncu: str, problem_dir: Path, lock: str) -> tuple[subprocess.Popen, float]:
    job = profile_job(str(problem_dir), str(problem_dir / "solutions" / "oracle.py"), lock)
    proc = subprocess.Popen(profile_argv(ncu, sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO)
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    return proc, time.perf_counter()


def finish(run: tuple[subprocess.Popen, float]) -> tuple[str, float]:
    """A run's output and its end time (its stdin is already closed: communicate() would flush it)."""
    proc = run[0]
    text = proc.stdout.read()
    proc.wait(timeout=300)
    return text, time.perf_counter()


def main(argv: list[str]) -> int:
    ncu = find_ncu()
    if ncu is None:
        print("error: ncu is not installed", file=sys.stderr)
        return 2
    problem = argv[0] if argv else "biology/l1/smith_waterman_score"
    problem_dir = REPO / "problems" / problem
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    lock = os.environ.get("GPU_LOCK", "/tmp/popcorn-gpu0.lock")
    for n in (1, 2, 3):
        runs = [start(ncu, problem_dir, lock) for _ in range(n)]
        with ThreadPoolExecutor(n) as pool:  # each run's own end time
            ended = list(pool.map(finish, runs))
        for i, ((proc, t0), (text, t1)) in enumerate(zip(runs, ended)):
            kernels = len(parse_raw_csv(text))
            row = {"concurrent": n, "run": i, "problem": problem, "wall_s": round(t1 - t0, 1),
                   "rc": proc.returncode, "kernels": kernels,
                   "resource_error": next((e for e in RESOURCE_ERRORS if e in text), None),
                   "tail": text[-400:] if proc.returncode or not kernels else ""}
            with open(out / "ncu_overlap.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{n} at once, run {i}: rc {row['rc']}, {row['kernels']} kernels, {row['wall_s']} s"
                  + (f", {row['resource_error']}" if row["resource_error"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
