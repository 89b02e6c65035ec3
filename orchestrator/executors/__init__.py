"""Executors: where and how many episodes of a run execute at once.

- `local` (LocalExecutor): threads on this machine, GPUs leased from a pool; scorings
  share a GPU except while one times (gpus.py);
- `ray` (RayExecutor): one Ray task per episode on a cluster, records streamed back
  to the driver, lost workers retried and recorded as infra_error.

Both take a `Work` (work.py: the real AgentWork, or the StandInWork of the tests and
benchmark) and the planned items without a record, and append records to the run
directory as episodes finish, with one progress bar and a summary of failures by
class. `python -m orchestrator run` calls `execute`.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

from orchestrator.agent.records import RunDir
from orchestrator.errors import UserError
from orchestrator.executors.gpus import GpuPool, Lease, SharedExclusiveLock
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.progress import Progress, failures_by_class, outcome
from orchestrator.executors.work import AgentWork, Item, Work

EXECUTORS = ("local", "ray")

__all__ = ["EXECUTORS", "AgentWork", "GpuPool", "Lease", "LocalExecutor", "Progress", "SharedExclusiveLock",
           "Work", "execute", "failures_by_class", "make_executor", "outcome"]


def make_executor(kind: str, gpus: Sequence[int], max_parallel: int | None = None, ray_address: str | None = None,
                  env_vars: dict[str, str] | None = None) -> Any:
    if max_parallel is not None and max_parallel < 1:
        raise UserError("--max-parallel must be at least 1")
    if kind == "local":
        if ray_address:
            print("--ray-address is ignored without --executor ray", file=sys.stderr)
        return LocalExecutor(gpus, max_parallel)
    if kind == "ray":
        from orchestrator.executors.ray_executor import RayExecutor

        return RayExecutor(ray_address, max_parallel, env_vars=env_vars)
    raise UserError(f"unknown executor {kind!r} (known: {', '.join(EXECUTORS)})")


def execute(executor: Any, work: Work, items: Sequence[Item], run_dir: RunDir, *, desc: str,
            quiet: bool = False) -> None:
    """Run `items` with `executor`, appending records to `run_dir`; then print the
    outcome of this invocation by class (stderr)."""
    progress = Progress(len(items), desc, quiet=quiet)
    try:
        executor.run(work, items, run_dir, progress)
    finally:
        progress.close()
        done = {i["episode_id"] for i in items}
        mine = [r for r in run_dir.load_records() if r.get("episode_id") in done]
        if items:
            lost = f", {progress.lost_workers} lost worker(s) retried" if progress.lost_workers else ""
            print(f"{executor.name}: {len(mine)}/{len(items)} episode(s) recorded: {failures_by_class(mine)}{lost}",
                  file=sys.stderr)
