"""A CPU stand-in for an episode, for the executor tests and the benchmark.

It has an episode's shape without a model or a GPU: an "agent" phase that holds no
GPU (sleep), then a "scoring" phase under the lease's exclusive hold (sleep), then a
transcript and an artifact written into the run directory and a record whose verdict
is a pure function of the episode id (so results can be compared across executors).
With `pid_dir`, each run writes `<pid_dir>/<episode_id>.pid` first ("PID NODE_ID"), so a
test can kill the worker process running it, or the Ray node.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.agent.records import RunDir
from orchestrator.executors.gpus import Lease
from orchestrator.executors.work import Item, infra_record, now_iso

FAILURES = ("incorrect", "stress_failed", "compile_error")


def expected_verdict(episode_id: str) -> dict[str, Any]:
    """Deterministic: about half pass, the others fail with one of FAILURES."""
    digest = hashlib.sha256(episode_id.encode()).digest()
    if digest[0] % 2 == 0:
        return {"status": "passed", "failure_class": None}
    return {"status": "failed", "failure_class": FAILURES[digest[1] % len(FAILURES)]}


@dataclasses.dataclass
class StandInWork:
    agent_s: float = 0.2           # the model's turns: no GPU held
    scoring_s: float = 0.2         # the judge: GPUs held exclusively
    scoring_by_problem: dict[str, float] = dataclasses.field(default_factory=dict)  # problem -> its own scoring_s
    gpus_per_item: int = 1         # 0: a CPU-only run
    multi_gpu_every: int = 0       # every n-th item (by attempt) needs all available GPUs
    pid_dir: str | None = None
    run_id: str = "standin"
    raise_on: dict[str, str] = dataclasses.field(default_factory=dict)   # episode id -> "config" | "bug"

    def gpus_needed(self, item: Item, available: int) -> int:
        if self.gpus_per_item == 0:
            return 0
        if self.multi_gpu_every and int(item["attempt"]) % self.multi_gpu_every == self.multi_gpu_every - 1:
            return max(1, available)
        return self.gpus_per_item

    def __call__(self, item: Item, lease: Lease, run_dir: RunDir) -> dict[str, Any]:
        if self.pid_dir:
            Path(self.pid_dir).mkdir(parents=True, exist_ok=True)
            (Path(self.pid_dir) / f"{item['episode_id']}.pid").write_text(f"{os.getpid()} {_ray_node_id()}")
        start, started_at = time.monotonic(), now_iso()
        failure = self.raise_on.get(item["episode_id"])
        if failure == "config":
            from orchestrator.agent.client import ModelConfigError

            raise ModelConfigError("stand-in: the endpoint rejects this model name")
        if failure:
            raise RuntimeError(f"stand-in: {failure}")
        time.sleep(self.agent_s)
        with lease.exclusive():
            held_from = time.monotonic()
            time.sleep(self.scoring_by_problem.get(item["problem"], self.scoring_s))
            held_to = time.monotonic()
        code = f"# stand-in submission for {item['episode_id']}\n"
        artifact = run_dir.write_artifact(item["episode_id"], code)
        run_dir.write_transcript(item["episode_id"], {"episode_id": item["episode_id"], "messages": []})
        verdict = {**expected_verdict(item["episode_id"]),
                   "solution": {"path": str(artifact), "sha256": hashlib.sha256(code.encode()).hexdigest()}}
        return {"schema_version": 1, "kind": "episode", "run_id": self.run_id, "episode_id": item["episode_id"],
                "problem": item["problem"], "attempt": int(item["attempt"]), "track": "popcorn2",
                "harness": "st", "model": "standin", "status": "completed", "error": None, "verdict": verdict,
                "turns": 1, "tokens": {"prompt": 0, "completion": 0, "total": 0}, "tool_calls": [],
                "transcript": str(run_dir.transcript(item["episode_id"]).relative_to(run_dir.path)),
                "artifact": {"path": str(artifact.relative_to(run_dir.path)), "sha256": verdict["solution"]["sha256"]},
                "started_at": started_at, "finished_at": now_iso(), "wall_s": round(time.monotonic() - start, 3),
                "standin": {"gpus": list(lease.gpus), "pid": os.getpid(), "held": [held_from, held_to],
                            "span": [start, time.monotonic()],
                            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}}

    def lost_record(self, item: Item, error: str, wall_s: float) -> dict[str, Any]:
        base = {"run_id": self.run_id, "track": "popcorn2", "harness": "st", "model": "standin"}
        return infra_record(base, item, error, wall_s)


def plan_items(count: int, problems: int = 1) -> list[Item]:
    """`count` stand-in episodes over `problems` fake problems."""
    return [{"episode_id": f"standin.p{i % problems}.a{i // problems}", "problem": f"standin/p{i % problems}",
             "attempt": i // problems} for i in range(count)]


def comparable(record: dict[str, Any]) -> str:
    """What must agree between executors: identity, status, verdict, artifact (not timing or placement)."""
    verdict = record.get("verdict") or {}
    return json.dumps({"episode_id": record["episode_id"], "status": record["status"],
                       "verdict": {k: verdict.get(k) for k in ("status", "failure_class")},
                       "artifact": (record.get("artifact") or {}).get("sha256")}, sort_keys=True)


def _ray_node_id() -> str:
    """The Ray node running this episode ("-" outside Ray), so a test can kill a busy node."""
    ray = sys.modules.get("ray")
    return ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else "-"
