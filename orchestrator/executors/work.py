"""What an executor runs: a unit of `Work` per planned episode.

`Work` is picklable (Ray ships it to worker nodes with cloudpickle) and has three
parts: how many GPUs an item needs, running it under a GPU `Lease` into a run
directory (the real one locally, a scratch one on a Ray worker), and the record of
an item whose worker was lost. `AgentWork` is the real episode (model loop, tools in
the chosen sandbox, scoring); `StandInWork` (standin.py) is a CPU stand-in with the
same shape for tests and benchmarks.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from orchestrator.agent.records import RunDir
from orchestrator.executors.gpus import Lease

Item = dict[str, Any]  # a planned episode: {"episode_id", "problem", "attempt"}


class Work(Protocol):
    def gpus_needed(self, item: Item, available: int) -> int:
        """GPUs the item holds for its whole life (0 on a CPU); `available` (the GPUs an
        executor has, or its largest node's) is the world size of a collectives problem
        that does not declare one."""

    def __call__(self, item: Item, lease: Lease, run_dir: RunDir) -> dict[str, Any]:
        """Run the item and return its record; transcripts and artifacts go under run_dir."""

    def lost_record(self, item: Item, error: str, wall_s: float) -> dict[str, Any]:
        """An infra_error record for an item whose worker or node was lost."""


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def infra_record(base: Mapping[str, Any], item: Item, error: str, wall_s: float) -> dict[str, Any]:
    """A schema-valid episode record that charges nothing to the model."""
    stamp = now_iso()
    return {"schema_version": 1, "kind": "episode", **base,
            "episode_id": item["episode_id"], "problem": item["problem"], "attempt": int(item["attempt"]),
            "status": "infra_error", "error": error, "verdict": None, "turns": 0,
            "tokens": {"prompt": 0, "completion": 0, "cached": 0, "reasoning": 0, "total": 0},
            "cost_usd": None, "tool_calls": [], "tools_used": {}, "transcript": None, "artifact": None,
            "started_at": stamp, "finished_at": stamp, "wall_s": round(wall_s, 3)}


def stops_the_run(exc: BaseException) -> bool:
    """A bad model configuration (every episode would fail alike) or an interrupt stops the
    run; any other error escaping an episode is that episode's infra_error."""
    from orchestrator.agent.client import ModelConfigError

    return isinstance(exc, ModelConfigError) or not isinstance(exc, Exception)


def failed_record(work: "Work", item: Item, summary: str, detail: str, wall_s: float) -> dict[str, Any]:
    record = work.lost_record(item, summary, wall_s)
    record["traceback"] = detail[-4000:]
    return record


# ------------------------------------------------------------------ GPU holds around the sandbox

class LeasedSandbox:
    """A sandbox whose every exec holds the lease: shared for the tools, exclusive for scoring.
    Everything else (put_files, get_files, workdir, python, isolation, ...) passes through."""

    def __init__(self, inner: Any, hold: Callable[[], Any], exclusive: Callable[[], Any] | None = None):
        self._inner = inner
        self._hold = hold
        self._exclusive = exclusive or hold
        self._measuring = threading.local()

    def exec(self, cmd: Sequence[str], **kwargs: Any) -> Any:
        if getattr(self._measuring, "active", False):  # measuring() already holds the GPUs
            return self._inner.exec(cmd, **kwargs)
        with self._hold():
            return self._inner.exec(cmd, **kwargs)

    @contextlib.contextmanager
    def measuring(self, alone: bool = True) -> Iterator[None]:
        """The GPUs held exclusively across several execs: a tool that measures them (ceilings,
        ncu, a timing) must not share them with other episodes' tool calls. `alone=False`: the
        process measured takes this host's GPU lock files itself (sandbox/gpu_holds.py), so the
        execs hold what they would hold anyway (a scoring's busy accounting)."""
        with (self._exclusive() if alone else self._hold()):
            self._measuring.active = True
            try:
                yield
            finally:
                self._measuring.active = False

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> "LeasedSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass
class LeasedEvaluate:
    """scoring.evaluate with the lease: a tool's compile/check runs in the episode's sandbox
    (its execs already hold the lease shared); the final scoring (mode full, no sandbox
    given) gets a fresh sandbox whose judge exec holds the lease's scoring hold (shared:
    the judge times under the host's GPU lock files; a container's judge is held
    exclusively by the pipeline through `measuring`), so static analysis, starting the
    sandbox and copying files hold nothing."""

    inner: Callable[..., dict[str, Any]]
    lease: Lease
    run_id: str
    episode_id: str

    def __call__(self, entry: Any, solution_path: Any, settings: Any, *, mode: str = "full",
                 sandbox: Any = None, **kwargs: Any) -> dict[str, Any]:
        if sandbox is not None or mode != "full" or not self.lease.gpus:
            return self.inner(entry, solution_path, settings, mode=mode, sandbox=sandbox, **kwargs)
        if getattr(entry, "kind", "problem") != "problem":
            with self.lease.exclusive():  # translation scoring builds its own sandboxes
                return self.inner(entry, solution_path, settings, mode=mode, sandbox=None, **kwargs)
        from orchestrator.sandbox.base import SandboxError
        from orchestrator.scoring import pipeline

        try:  # the sandbox the pipeline would create itself (backend, image, GPUs), made here
            fresh = pipeline.create_sandbox(entry, settings, run_id=self.run_id, episode=f"{self.episode_id}.score")
        except SandboxError:
            with self.lease.exclusive():  # let the pipeline record the failure as it always does
                return self.inner(entry, solution_path, settings, mode=mode, sandbox=None, **kwargs)
        with LeasedSandbox(fresh, self.lease.scoring, self.lease.exclusive) as scoring_box:
            return self.inner(entry, solution_path, settings, mode=mode, sandbox=scoring_box, **kwargs)


# ------------------------------------------------------------------ the real episode

@functools.lru_cache(maxsize=None)
def _device_info(device: str, gpus: tuple[int, ...]) -> dict[str, Any]:
    """What the prompt says about the episode's GPU (asked once per GPU set)."""
    from orchestrator.agent.prompts import host_device_info

    return host_device_info(device, list(gpus))


def world_size(manifest: Mapping[str, Any], settings: Any, available: int) -> int:
    """Ranks of a collectives problem: --world-size, else the manifest's default (a number,
    or {"default", "min", "max"}), else every GPU available."""
    chosen = getattr(settings, "world_size", None)
    if chosen:
        return int(chosen)
    declared = manifest.get("world_size")
    if isinstance(declared, Mapping):
        declared = declared.get("default")
    return int(declared) if declared else available


@dataclasses.dataclass
class AgentWork:
    """One agent episode as `python -m orchestrator run` runs it (orchestrator/agent/run.py).

    `env` is the run's EpisodeEnv; each item gets a copy bound to its lease (its GPUs in
    the settings, the sandbox execs and the scoring holding the lease) and its own agent
    from `new_agent` (built where the episode runs: on a Ray worker, with that node's
    endpoint environment)."""

    env: Any                        # orchestrator.agent.harness.EpisodeEnv
    new_agent: Callable[[], Any]
    run_id: str
    run_seed: int
    opts: dict[str, Any]            # track, harness, model, attempts, max_turns

    def _entry(self, item: Item) -> Any:
        from orchestrator import catalog

        return catalog.find(self.env.settings, item["problem"])

    def gpus_needed(self, item: Item, available: int) -> int:
        if self.env.device != "cuda":
            return 0
        entry = self._entry(item)
        if not entry.collectives:
            return 1
        return max(1, world_size(entry.manifest, self.env.settings, available))

    def bound_env(self, item: Item, lease: Lease, run_dir: RunDir) -> Any:
        from orchestrator.agent.run import sandbox_factory
        from orchestrator.agent.tools import Scoring

        env = self.env
        gpus = list(lease.gpus)
        update: dict[str, Any] = {"device": env.device}
        if gpus:
            update["gpus"] = ",".join(map(str, gpus))
        settings = env.settings.model_copy(update=update)
        make_box = sandbox_factory(settings, env.device, gpus)

        def leased_factory(spec: Any) -> Any:
            box = make_box(spec)
            return LeasedSandbox(box, lease.shared, lease.exclusive) if gpus else box

        scoring = Scoring(evaluate=LeasedEvaluate(env.scoring.evaluate, lease, self.run_id, item["episode_id"]),
                          analyze=env.scoring.analyze)
        device_info = _device_info(env.device, tuple(gpus)) if gpus else env.device_info
        return dataclasses.replace(env, settings=settings, run_dir=run_dir, scoring=scoring,
                                   sandbox_factory=leased_factory, device_info=device_info)

    def __call__(self, item: Item, lease: Lease, run_dir: RunDir) -> dict[str, Any]:
        from orchestrator.agent.harness import EpisodeSpec, derive_seed, run_episode

        spec = EpisodeSpec(run_id=self.run_id, episode_id=item["episode_id"], entry=self._entry(item),
                           track=self.opts["track"], harness=self.opts["harness"], model=self.opts["model"],
                           attempt=int(item["attempt"]), seed=derive_seed(self.run_seed, item["episode_id"]))
        return run_episode(spec, self.new_agent(), self.bound_env(item, lease, run_dir))

    def lost_record(self, item: Item, error: str, wall_s: float) -> dict[str, Any]:
        from orchestrator import BENCHMARK_VERSION

        try:
            entry = self._entry(item)
            about = {"domain": entry.domain, "level": entry.level, "family": entry.family}
        except Exception:  # the record must be written even if the catalog moved
            about = {}
        base = {"benchmark_version": BENCHMARK_VERSION, "run_id": self.run_id, "track": self.opts["track"],
                "harness": self.opts["harness"], "model": self.opts["model"], **about}
        return infra_record(base, item, error, wall_s)


# ------------------------------------------------------------------ files of a record

def record_files(record: Mapping[str, Any]) -> Iterator[str]:
    """Run-dir relative paths a record points at (its transcript and artifact)."""
    if record.get("transcript"):
        yield str(record["transcript"])
    artifact = record.get("artifact") or {}
    if artifact.get("path"):
        yield str(artifact["path"])


def rebase_record(record: dict[str, Any], old_root: Path, new_root: Path) -> dict[str, Any]:
    """Point absolute paths of a record made in a scratch run dir at the real one."""
    verdict = record.get("verdict") or {}
    solution = verdict.get("solution") or {}
    path = solution.get("path")
    if isinstance(path, str) and path.startswith(str(old_root)):
        solution["path"] = str(new_root) + path[len(str(old_root)):]
    return record


def elapsed(start: float) -> float:
    return time.monotonic() - start
