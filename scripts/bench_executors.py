#!/usr/bin/env python3
"""Executor benchmark (prints figures; not a test).

    python scripts/bench_executors.py throughput [--episodes 32] [--gpus 4] [--ray-address ADDR]
    python scripts/bench_executors.py busy [--gpu-counts 1,2,4,8] [--slots 1,2,4]
    python scripts/bench_executors.py order [--gpus 2] [--scale 0.02]
    python scripts/bench_executors.py compare-runs RESULTS/run_1gpu RESULTS/run_2gpu

throughput: episodes per hour against the number of concurrent workers, with the CPU
  stand-in episode (orchestrator/executors/standin.py: a model phase that holds no GPU,
  then a scoring phase that holds its GPU exclusively; both sleep, so the figures show
  the scheduler, not this machine's CPUs). With --ray-address, the same against Ray.
busy: the share of time the GPUs are busy scoring (the union of scoring holds per GPU / (GPUs x wall))
  on N GPUs, for several episodes per GPU. Goal: >= 90 %.
order: the busy share on N GPUs of episodes of unequal length, started in catalog order,
  then longest-first from the catalog run's own records (orchestrator/executors/order.py):
  by default the six Popcorn2 oracle episode walls of the 2-GPU H200 (2026-11-30), scaled.
compare-runs: two real runs of the same episodes (scripts/gpu/executors_x2.sh): episodes
  per hour of each, their ratio, and the scoring busy share of each run's GPUs.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

from orchestrator.agent.records import RunDir  # noqa: E402
from orchestrator.executors import LocalExecutor, Progress  # noqa: E402
from orchestrator.executors.gpus import held_seconds  # noqa: E402
from orchestrator.executors.order import order_episodes  # noqa: E402
from orchestrator.executors.standin import StandInWork, plan_items  # noqa: E402

# Popcorn2 oracle episode walls (s) on the 2-GPU H200, 2026-11-30 12:50 (scripts/gpu/executors_x2.sh):
# smith_waterman_score, triangle_multiplicative_update, hmc_leapfrog, euclidean_distance_transform,
# featherstone_aba, geometric_jacobian, in catalog order.
ORACLE_WALLS_S = (33.7, 46.8, 31.0, 40.6, 27.9, 37.3)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _timed(executor: Any, work: StandInWork, episodes: int) -> tuple[float, RunDir]:
    run_dir = RunDir(Path(tempfile.mkdtemp(prefix="bench-executors-")))
    items = plan_items(episodes, problems=max(1, episodes // 2))
    start = time.monotonic()
    executor.run(work, items, run_dir, Progress(len(items), "bench", quiet=True))
    wall = time.monotonic() - start
    assert len(run_dir.load_records()) == episodes, "an episode is missing"
    return wall, run_dir


def throughput(args: argparse.Namespace) -> None:
    work = StandInWork(agent_s=args.agent_s, scoring_s=args.scoring_s)
    gpus = list(range(args.gpus))
    rows, base = [], None
    for workers in _ints(args.workers):
        wall, _ = _timed(LocalExecutor(gpus, max_parallel=workers), work, args.episodes)
        rate = args.episodes / wall * 3600
        base = base or rate
        bound = _bound(workers, args.gpus, args.agent_s, args.scoring_s)
        rows.append(["local", workers, f"{wall:.2f}", f"{rate:,.0f}", f"{rate / base:.2f}x", f"{bound:,.0f}"])
    if args.ray_address:
        from orchestrator.executors.ray_executor import RayExecutor

        import ray

        ray.init(address=args.ray_address, log_to_driver=False)
        try:
            ray_work = StandInWork(agent_s=args.agent_s, scoring_s=args.scoring_s)
            _timed(RayExecutor(args.ray_address, max_parallel=args.gpus), ray_work, args.gpus)  # warm the workers
            ray_base = None
            for workers in _ints(args.workers):
                wall, _ = _timed(RayExecutor(args.ray_address, max_parallel=workers), ray_work, args.episodes)
                rate = args.episodes / wall * 3600
                ray_base = ray_base or rate
                rows.append(["ray", workers, f"{wall:.2f}", f"{rate:,.0f}", f"{rate / ray_base:.2f}x",
                             f"{_bound(workers, args.gpus, args.agent_s, args.scoring_s):,.0f}"])
        finally:
            ray.shutdown()
    print(f"throughput: {args.episodes} stand-in episodes (model {args.agent_s}s, scoring {args.scoring_s}s "
          f"exclusive), {args.gpus} GPU slot(s)")
    print(tabulate(rows, headers=["executor", "workers", "wall s", "episodes/h", "vs 1 worker", "ideal episodes/h"]))


def _bound(workers: int, gpus: int, agent_s: float, scoring_s: float) -> float:
    """Episodes per hour if nothing but the two limits mattered: workers busy all the
    time, or every GPU scoring all the time."""
    return min(workers / (agent_s + scoring_s), max(gpus, 1) / scoring_s) * 3600


def busy(args: argparse.Namespace) -> None:
    rows = []
    work = StandInWork(agent_s=args.agent_s, scoring_s=args.scoring_s)
    for count in _ints(args.gpu_counts):
        for slots in _ints(args.slots):
            executor = LocalExecutor(list(range(count)), max_parallel=count * slots)
            episodes = count * args.per_gpu
            wall, _ = _timed(executor, work, episodes)
            held = sum(executor.pool.busy_seconds().values())
            rows.append([count, slots, episodes, f"{wall:.2f}", f"{100 * held / (count * wall):.1f} %"])
    print(f"GPU busy share: stand-in episodes (model {args.agent_s}s holding no GPU, scoring {args.scoring_s}s "
          f"exclusive), {args.per_gpu} per GPU; goal >= 90 %")
    print(tabulate(rows, headers=["GPUs", "episodes per GPU at once", "episodes", "wall s", "GPUs busy scoring"]))


def _list_schedule_end(durations: list[float], gpus: int) -> float:
    """When a queue of `durations` ends on `gpus` GPUs, each taking the next as it frees."""
    ends = [0.0] * max(gpus, 1)
    for d in durations:
        ends[ends.index(min(ends))] += d
    return max(ends)


def order(args: argparse.Namespace) -> None:
    walls = [float(w) for w in args.walls.split(",")] if args.walls else list(ORACLE_WALLS_S)
    items = plan_items(len(walls), problems=len(walls))
    seconds = {item["problem"]: w * args.scale for item, w in zip(items, walls)}
    work = StandInWork(agent_s=0.0, scoring_by_problem=seconds)
    results = Path(tempfile.mkdtemp(prefix="bench-order-"))
    rows = []
    for name in ("catalog", "longest-first"):
        ordered, said = order_episodes(items, name, results, "st", "standin")
        executor = LocalExecutor(list(range(args.gpus)), max_parallel=args.gpus)
        run_dir = RunDir(results / name)
        start = time.monotonic()
        executor.run(work, ordered, run_dir, Progress(len(ordered), name, quiet=True))
        wall = time.monotonic() - start
        held = sum(executor.pool.busy_seconds().values())
        ideal = _list_schedule_end([seconds[i["problem"]] for i in ordered], args.gpus)
        rows.append([name, said.split(": ", 1)[1], f"{wall:.2f}", f"{ideal:.2f}",
                     f"{100 * held / (args.gpus * wall):.1f} %",
                     f"{100 * sum(seconds.values()) / (args.gpus * ideal):.1f} %"])
    print(f"start order: {len(walls)} stand-in episodes, scoring {', '.join(f'{w:g}' for w in walls)} s "
          f"x {args.scale:g}, on {args.gpus} GPU(s); longest-first reads the catalog run's records")
    print(tabulate(rows, headers=["order", "how", "wall s", "list-schedule s", "GPUs busy scoring",
                                  "list-schedule busy"]))


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def run_figures(path: Path) -> dict[str, Any]:
    records = RunDir(path).load_records()
    if not records:
        raise SystemExit(f"{path}: no records")
    start = min(_stamp(r["started_at"]) for r in records)
    end = max(_stamp(r["finished_at"]) for r in records)
    gpus = sorted({g for r in records for g in (r.get("placement") or {}).get("gpus", [])})
    held = sum(held_seconds(records, g) for g in gpus)
    wall = max(end - start, 1e-9)
    return {"run": path.name, "episodes": len(records), "gpus": gpus, "wall_s": wall,
            "per_hour": len(records) / wall * 3600, "busy": held / (max(len(gpus), 1) * wall),
            "passed": sum(1 for r in records if (r.get("verdict") or {}).get("status") == "passed")}


def compare_runs(args: argparse.Namespace) -> None:
    figures = [run_figures(Path(p)) for p in args.runs]
    rows = [[f["run"], ",".join(map(str, f["gpus"])) or "cpu", f["episodes"], f["passed"], f"{f['wall_s']:.0f}",
             f"{f['per_hour']:.0f}", f"{100 * f['busy']:.1f} %"] for f in figures]
    print(tabulate(rows, headers=["run", "GPUs", "episodes", "passed", "wall s", "episodes/h", "GPUs busy scoring"]))
    if len(figures) == 2:
        ratio = figures[1]["per_hour"] / figures[0]["per_hour"]
        print(f"throughput ratio {figures[1]['run']} / {figures[0]['run']}: {ratio:.2f}x")
        if args.json:
            Path(args.json).write_text(json.dumps({"runs": figures, "ratio": ratio}, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--episodes", type=int, default=32)
    t.add_argument("--workers", default="1,2,4,8,16")
    t.add_argument("--gpus", type=int, default=4, help="GPUs of the local pool; with Ray, the cluster's GPU count")
    t.add_argument("--agent-s", type=float, default=0.3)
    t.add_argument("--scoring-s", type=float, default=0.05)
    t.add_argument("--ray-address", default=None, help="also run the stand-in on this Ray cluster")
    b = sub.add_parser("busy")
    b.add_argument("--gpu-counts", default="1,2,4,8")
    b.add_argument("--slots", default="1,4,8")
    b.add_argument("--per-gpu", type=int, default=40)
    b.add_argument("--agent-s", type=float, default=0.15)
    b.add_argument("--scoring-s", type=float, default=0.05)
    o = sub.add_parser("order")
    o.add_argument("--gpus", type=int, default=2)
    o.add_argument("--walls", default=None, help="episode seconds in catalog order, comma-separated "
                                                 "(default: the six oracle walls of the 2-GPU H200)")
    o.add_argument("--scale", type=float, default=0.02, help="seconds of stand-in per second of --walls")
    c = sub.add_parser("compare-runs")
    c.add_argument("runs", nargs="+")
    c.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    {"throughput": throughput, "busy": busy, "order": order, "compare-runs": compare_runs}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
