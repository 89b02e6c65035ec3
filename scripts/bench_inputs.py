"""How long does one input set take to make at a problem's default (H200) shape, on this CPU?

A full evaluation makes 15-20 sets (one per correctness trial and stress shape, four for
timing), and the judge makes every one on the CPU (device "cpu"), as this does: a set that
takes seconds here costs an evaluation on the GPU machine wall time too (bfs_level_expand's
took 23 s on 2 cores before its sorts were cut down).

    python3 scripts/bench_inputs.py PROBLEM_DIR        # one JSON line: seconds, bytes
    python3 scripts/bench_inputs.py --all [--timeout S] [--top N]   # every problem, slowest first

Collectives problems make rank 0's set of world size 2.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.images import problem_folders  # noqa: E402
from orchestrator.runner.problem import load_problem, tree_bytes  # noqa: E402
from orchestrator.runner.shapes import default_shape  # noqa: E402


def one(directory: str) -> dict:
    problem = load_problem(directory)
    shape = default_shape(problem.manifest["shapes"], "cuda")
    extra = {"rank": 0, "world_size": 2} if problem.manifest.get("collectives") else {}
    start = time.perf_counter()
    inputs = problem.inputs(shape, 1, "cpu", **extra)
    seconds = time.perf_counter() - start
    return {"problem": problem.id, "seconds": round(seconds, 3), "bytes": tree_bytes(inputs)}


def every(timeout: float, top: int) -> None:
    rows = []
    for folder in tqdm(problem_folders(REPO / "problems"), desc="input sets", unit="problem"):
        failed = {"problem": folder.relative_to(REPO / "problems").as_posix(), "seconds": None, "bytes": None}
        try:
            done = subprocess.run([sys.executable, __file__, str(folder)], capture_output=True,
                                  text=True, timeout=timeout)
            row = json.loads(done.stdout) if done.returncode == 0 else {
                **failed, "error": (done.stderr.strip().splitlines() or ["?"])[-1][:120]}
        except subprocess.TimeoutExpired:
            row = {**failed, "error": f"over {timeout:g} s"}
        rows.append(row)
    rows.sort(key=lambda r: -1 if r["seconds"] is None else -r["seconds"])
    table = [[r["problem"], r["seconds"], None if r["bytes"] is None else round(r["bytes"] / 2**20, 1),
              r.get("error", "")] for r in rows[:top]]
    print(tabulate(table, headers=["problem", "s per set", "MiB", "error"]))
    total = sum(r["seconds"] or 0 for r in rows)
    print(f"{len(rows)} problems, {total:.1f} s for one set of each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", nargs="?", help="a problem folder (problems/DOMAIN/LEVEL/NAME)")
    parser.add_argument("--all", action="store_true", help="every problem, each in its own process")
    parser.add_argument("--timeout", type=float, default=180, help="seconds allowed per problem with --all")
    parser.add_argument("--top", type=int, default=94, help="rows of the table with --all (slowest first)")
    args = parser.parse_args()
    if args.all == bool(args.problem):
        parser.error("give one problem folder or --all")
    if args.problem and not (Path(args.problem) / "manifest.json").is_file():
        parser.error(f"{args.problem}: no manifest.json there (a problem folder is problems/DOMAIN/LEVEL/NAME)")
    if args.all:
        every(args.timeout, args.top)
    else:
        print(json.dumps(one(args.problem)))


if __name__ == "__main__":
    main()
