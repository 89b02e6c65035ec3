"""The Ray executor: each episode a Ray task with its GPU and CPU resources.

The driver (`python -m orchestrator run --executor ray --ray-address ADDR`) submits one
task per planned episode, `num_gpus` = the GPUs it needs, `num_cpus` = 1, at most
`max_parallel` in flight. A whole GPU per task makes scoring exclusive by construction;
with `max_parallel` above the cluster's GPU count, single-GPU episodes get
1/ceil(max_parallel / GPUs) of a GPU and hold it through a host-wide file lock, shared
for tools and exclusive for measurements (gpus.HostGpuLock), while the judge's own lock
files keep a timing or a measurement off other judges' kernels, as under the local executor. A
task runs the episode on its node, in the chosen sandbox, into a scratch run directory,
and returns its record with the transcript and artifact bytes; the driver writes them
into results/<run>/ (only the driver writes episodes.jsonl).

Ray's own task retries are off (max_retries=0) so that a loss is seen and recorded: a
task whose worker process or node died gets an infra_error record in
episodes.infra.jsonl (the audit file --resume also uses) and runs again, up to
`retries` times; after that its infra_error record goes to episodes.jsonl, the run
exits 3, and `--resume` (with either executor) runs it again.

Every node must be able to import `orchestrator` and read the problems at the paths
the driver's settings name (one checkout at the same path on every node, or a
shared filesystem); Docker images are pulled by each node as the sandbox asks.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from orchestrator.agent.records import RunDir, atomic_write
from orchestrator.errors import UserError
from orchestrator.executors.gpus import GpuState, HostGpuLock, Lease, SharedExclusiveLock, host_lock_dir
from orchestrator.executors.progress import Progress
from orchestrator.executors.work import (Item, Work, elapsed, failed_record, rebase_record, record_files,
                                         stops_the_run)

DEFAULT_RETRIES = 2


def _import_ray(local_instance: bool = False) -> Any:
    if local_instance and "ray" not in sys.modules:
        # A Ray started here for this run serves only this machine: bind it to 127.0.0.1
        # (Ray reads this when imported; on Linux it otherwise binds the external address).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError as exc:
        raise UserError("--executor ray needs Ray: scripts/install/executors.sh installs the tested version") from exc
    return ray


def run_on_worker(work: Work, item: Item, shares_gpu: bool = False) -> dict[str, Any]:
    """The body of a Ray task: the episode under the GPUs Ray gave it, in a scratch run dir.
    A task with a whole GPU has it to itself; tasks sharing a GPU (fractional num_gpus)
    take the host-wide holds of gpus.HostGpuLock around tools (shared) and measurements
    (exclusive); scoring's judge takes the host's GPU lock files itself."""
    import ray

    gpus = sorted(int(g) for g in ray.get_gpu_ids())
    locks = [HostGpuLock(host_lock_dir() / f"gpu-{g}.lock") if shares_gpu else SharedExclusiveLock() for g in gpus]
    lease = Lease(None, [GpuState(g, lock) for g, lock in zip(gpus, locks)])
    scratch = Path(tempfile.mkdtemp(prefix="popcorn-episode-"))
    try:
        run_dir = RunDir(scratch)
        record = work(item, lease, run_dir)
        files = {rel: (scratch / rel).read_bytes() for rel in record_files(record) if (scratch / rel).is_file()}
        record.setdefault("placement", {}).update(executor="ray", node=socket.gethostname(), gpus=gpus,
                                                  node_id=ray.get_runtime_context().get_node_id(),
                                                  gpu_scoring_s=round(lease.scoring_s, 3), gpu_spans=lease.spans)
        return {"record": record, "files": files, "scratch": str(scratch)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None, max_parallel: int | None = None, retries: int = DEFAULT_RETRIES,
                 env_vars: Mapping[str, str] | None = None, cpus_per_episode: float = 1.0):
        self.address = address
        self.max_parallel = max_parallel
        self.retries = retries
        self.env_vars = dict(env_vars or {})
        self.cpus_per_episode = cpus_per_episode

    def describe(self) -> str:
        bound = f"{self.max_parallel} in flight" if self.max_parallel else "as many as the cluster fits"
        return f"ray executor at {self.address or 'a new local Ray instance'}, {bound}"

    def _connect(self) -> tuple[Any, bool]:
        """Ray, connected; and whether this call connected it (then run() disconnects)."""
        ray = _import_ray(local_instance=self.address is None)
        if ray.is_initialized():
            return ray, False
        runtime_env = {"env_vars": self.env_vars} if self.env_vars else None
        try:
            ray.init(address=self.address, runtime_env=runtime_env, log_to_driver=False,
                     include_dashboard=False if self.address is None else None)
        except ConnectionError as exc:
            raise UserError(f"--ray-address {self.address}: no Ray cluster answers ({exc})") from exc
        return ray, True

    def _episodes_per_gpu(self, ray: Any) -> int:
        """As locally: --max-parallel above the cluster's GPU count shares GPUs."""
        total = int(ray.cluster_resources().get("GPU", 0))
        if not self.max_parallel or total == 0 or self.max_parallel <= total:
            return 1
        return math.ceil(self.max_parallel / total)

    @staticmethod
    def _largest_node_gpus(ray: Any) -> int:
        return max([int(n.get("Resources", {}).get("GPU", 0)) for n in ray.nodes() if n.get("Alive")] or [0])

    def run(self, work: Work, items: Sequence[Item], run_dir: RunDir, progress: Progress) -> None:
        ray, connected_here = self._connect()
        try:
            self._run(ray, work, items, run_dir, progress)
        finally:
            if connected_here:
                ray.shutdown()

    def _run(self, ray: Any, work: Work, items: Sequence[Item], run_dir: RunDir, progress: Progress) -> None:
        from ray.exceptions import RayError, RayTaskError

        task = ray.remote(run_on_worker)
        node_gpus = self._largest_node_gpus(ray)
        needs = {item["episode_id"]: work.gpus_needed(item, node_gpus) for item in items}
        per_gpu = self._episodes_per_gpu(ray)
        if needs and max(needs.values()) > node_gpus:   # Ray would wait forever for such a node
            raise UserError(f"an episode needs {max(needs.values())} GPU(s); the largest node of the Ray cluster "
                            f"at {self.address or 'local'} has {node_gpus} (--device cpu runs without GPUs)")
        queue = list(items)
        queue.reverse()                      # pop() from the end keeps the planned order
        tries: dict[str, int] = {}
        started: dict[str, float] = {}
        pending: dict[Any, Item] = {}
        limit = self.max_parallel or len(items) or 1

        def submit(item: Item) -> None:
            gpus = needs[item["episode_id"]]
            shares = gpus == 1 and per_gpu > 1          # multi-GPU episodes take whole GPUs
            ref = task.options(num_gpus=1 / per_gpu if shares else gpus, num_cpus=self.cpus_per_episode,
                               max_retries=0, retry_exceptions=False,
                               name=f"episode:{item['episode_id']}").remote(work, item, shares)
            pending[ref] = item
            started[item["episode_id"]] = time.monotonic()

        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    submit(queue.pop())
                [ref], _ = ray.wait(list(pending), num_returns=1)
                item = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except RayTaskError as exc:   # the task's code raised on the worker: not a lost worker
                    self._failed(work, item, exc, run_dir, progress, started)
                    continue
                except RayError as exc:       # the worker process or its node died
                    self._lost(work, item, exc, run_dir, progress, started, tries, queue)
                    continue
                self._store(result, run_dir, progress)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    @staticmethod
    def _failed(work: Work, item: Item, exc: Any, run_dir: RunDir, progress: Progress,
                started: dict[str, float]) -> None:
        """The task's code raised on its worker (it cannot import orchestrator, read the
        problem, ...): that episode's infra_error with the worker's traceback, unless the
        model's configuration is bad (then the run stops, as locally)."""
        cause = getattr(exc, "cause", None)
        if cause is not None and stops_the_run(cause):
            raise cause from exc
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()   # Ray colours its tracebacks
        last = (text.splitlines() or ["?"])[-1]
        record = failed_record(work, item, f"ray task failed on its worker: {last}", text,
                               elapsed(started.get(item["episode_id"], time.monotonic())))
        run_dir.append_record(record)
        progress.update(record)

    def _lost(self, work: Work, item: Item, exc: BaseException, run_dir: RunDir, progress: Progress,
              started: dict[str, float], tries: dict[str, int], queue: list[Item]) -> None:
        episode = item["episode_id"]
        tries[episode] = tries.get(episode, 0) + 1
        reason = f"ray: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'worker lost'}"
        record = work.lost_record(item, f"{reason} (attempt {tries[episode]} of {self.retries + 1})",
                                  elapsed(started.get(episode, time.monotonic())))
        if tries[episode] <= self.retries:
            run_dir.append_record(record, run_dir.infra_episodes)   # audit; the episode runs again
            queue.append(item)
            progress.lost()
        else:
            run_dir.append_record(record)
            progress.update(record)

    @staticmethod
    def _store(result: Mapping[str, Any], run_dir: RunDir, progress: Progress) -> None:
        for rel, data in result["files"].items():
            atomic_write(run_dir.path / rel, data)
        record = rebase_record(dict(result["record"]), Path(result["scratch"]), run_dir.path)
        run_dir.append_record(record)
        progress.update(record)


def endpoint_env(api_key_env: str | None) -> dict[str, str]:
    """Variables a worker needs to reach the model's endpoint, taken from the driver."""
    names = [n for n in (api_key_env, "OPENAI_BASE_URL") if n]
    return {n: os.environ[n] for n in names if os.environ.get(n)}
