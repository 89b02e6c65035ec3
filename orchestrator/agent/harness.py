"""One agent episode: prompt -> (model turn -> tool calls)* -> submit -> scoring -> record.

Status of an episode (schemas/result.schema.json $defs/episode):
- completed: the model submitted and the submission was scored (the verdict says how well);
- no_submission: the model ended without submitting (st: it answered without a usable
  submission; a built-in agent ran out of messages);
- limit_reached: the turn, token or wall-time limit, or the model's context window,
  stopped it before it submitted;
- infra_error: the endpoint, the sandbox or the scorer failed; not charged to the model.

Tools run in the episode's sandbox (created at the first tool that needs one, closed
at the end); the submission is scored by `evaluate(..., mode="full")` in a fresh
sandbox with the episode's secret seed.
"""
from __future__ import annotations

import hashlib
import re
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from orchestrator.agent import prompts
from orchestrator.agent.accounting import Ledger, Limits, Price
from orchestrator.agent.client import Agent, ContextLimitExceeded, ModelConfigError
from orchestrator.agent.records import RunDir
from orchestrator.agent.tools import DEFAULT_OUTPUT_LIMIT, Scoring, Workspace, call_tool, tool_schemas
from orchestrator.errors import InfraError

try:
    from orchestrator import BENCHMARK_VERSION
except ImportError:  # pragma: no cover
    BENCHMARK_VERSION = "unknown"


@dataclass
class EpisodeSpec:
    run_id: str
    episode_id: str
    entry: Any
    track: str
    harness: str
    model: str
    attempt: int
    seed: int                     # the scoring seed (secret: never in a prompt)


@dataclass
class EpisodeEnv:
    """What every episode of a run shares."""

    settings: Any
    run_dir: RunDir
    scoring: Scoring
    device: str
    device_info: dict[str, Any]
    limits: Limits
    sandbox_factory: Callable[[EpisodeSpec], Any]
    price: Price | None = None
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    tool_timeout_s: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


def episode_id(problem_id: str, attempt: int) -> str:
    return f"{problem_id.replace('/', '.')}.a{attempt}"


def derive_seed(run_seed: int, episode: str) -> int:
    digest = hashlib.sha256(f"{run_seed}:{episode}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF


_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def code_from_text(text: str) -> str | None:
    """The last fenced Python block that defines ModelNew (st only: a model that wrote
    its answer as text instead of calling submit)."""
    blocks = [b for b in _FENCE.findall(text or "") if "class ModelNew" in b]
    return blocks[-1] if blocks else None


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _is_sandbox_error(exc: BaseException) -> bool:
    try:
        from orchestrator.sandbox.base import SandboxError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, SandboxError)


class Episode:
    def __init__(self, spec: EpisodeSpec, agent: Agent, env: EpisodeEnv):
        self.spec, self.agent, self.env = spec, agent, env
        self.ledger = Ledger(env.limits if spec.harness != "st" else Limits(1, env.limits.max_tokens, env.limits.max_wall_s))
        self.messages: list[dict[str, Any]] = []
        self.tool_log: list[dict[str, Any]] = []
        self.status: str | None = None
        self.error: str | None = None
        self.via: str | None = None
        self.internal_error: str | None = None
        self.started_at = _now()
        self.workspace = Workspace(
            entry=spec.entry, settings=env.settings, scoring=env.scoring, device=env.device,
            host_dir=env.run_dir.workdir(spec.episode_id),
            sandbox_factory=lambda: env.sandbox_factory(spec),
            output_limit=env.output_limit, tool_timeout_s=env.tool_timeout_s)

    # ---- the conversation
    def converse(self) -> None:
        spec = self.spec
        tools = tool_schemas(spec.harness)
        self.messages = prompts.initial_messages(spec.entry, spec.harness, self.ledger.limits.max_turns,
                                                 self.env.device, self.env.device_info, self.env.settings)
        self.agent.start_episode(spec.entry.id, spec.attempt,
                                 {"entry": spec.entry, "harness": spec.harness, "tools": [t["function"]["name"] for t in tools]})
        warned_last = False
        while True:
            why = self.ledger.exhausted()
            if why:
                self._end("no_submission" if spec.harness == "st" else "limit_reached", why)
                return
            if spec.harness != "st" and self.ledger.turns_left() == 1 and not warned_last:
                self.messages.append({"role": "user", "content": prompts.LAST_TURN})
                warned_last = True
            try:
                turn = self.agent.complete(self.messages, tools)
            except ContextLimitExceeded as exc:
                self._end("limit_reached", f"context window: {exc}")
                return
            self.ledger.add_turn(turn)
            self.messages.append(turn.message)
            if turn.tool_calls:
                self._run_tools(turn.tool_calls)
                if self.workspace.submitted is not None:
                    self.via = "submit"
                    return
            elif turn.gave_up:
                self._end("no_submission", "the agent ended without submitting")
                return
            elif spec.harness == "st":
                code = code_from_text(turn.text)
                if code is not None:
                    self.workspace.submitted, self.via = code, "text"
                    return
                self._end("no_submission", "answered without a submit call or a ModelNew code block")
                return
            else:
                self.messages.append({"role": "user", "content": prompts.NUDGE_TOOL})

    def _run_tools(self, calls: list[dict[str, Any]]) -> None:
        for call in calls:
            function = call.get("function") or {}
            name, raw = str(function.get("name", "")), str(function.get("arguments") or "")
            start = time.monotonic()
            result = call_tool(self.workspace, self.spec.harness, name, raw)
            wall = time.monotonic() - start
            self.ledger.add_tool(name, wall, result.ok)
            self.messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result.text})
            self.tool_log.append({"turn": self.ledger.turns, "id": call.get("id"), "name": name, "arguments": raw,
                                  "ok": result.ok, "wall_s": round(wall, 4), "message_index": len(self.messages) - 1,
                                  **({"data": result.data} if result.data else {})})
            if result.ends_episode:
                return

    def _end(self, status: str, error: str | None) -> None:
        self.status, self.error = status, error

    # ---- the whole episode
    def run(self) -> dict[str, Any]:
        verdict: dict[str, Any] | None = None
        artifact: dict[str, Any] | None = None
        try:
            try:
                self.converse()
            finally:
                self.workspace.close()
            code = self.workspace.submitted
            if code is not None and self.status is None:
                suffix = ".cu" if prompts.is_translation(self.spec.entry) else ".py"
                path = self.env.run_dir.write_artifact(self.spec.episode_id, code, suffix)
                artifact = {"path": str(path.relative_to(self.env.run_dir.path)),
                            "sha256": hashlib.sha256(code.encode()).hexdigest(), "via": self.via}
                verdict = self.env.scoring.evaluate(self.spec.entry, path, self.env.settings, mode="full",
                                                    seed=self.spec.seed)
                if verdict.get("failure_class") == "infra_error":
                    self._end("infra_error", f"scoring: {verdict.get('failure_detail', 'infrastructure failure')}")
                else:
                    self._end("completed", None)
            elif self.status is None:
                self._end("no_submission", "no submission")
        except ModelConfigError:
            raise
        except InfraError as exc:
            self._end("infra_error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            if _is_sandbox_error(exc):
                self._end("infra_error", f"sandbox: {type(exc).__name__}: {exc}")
            else:
                # A bug or a bad setup of ours (not the model's doing): this episode is
                # infra_error with the traceback in its transcript; the run goes on.
                self.internal_error = traceback.format_exc()
                self._end("infra_error", f"internal: {type(exc).__name__}: {exc}")
        return self._record(verdict, artifact)

    def _record(self, verdict: dict[str, Any] | None, artifact: dict[str, Any] | None) -> dict[str, Any]:
        spec, ledger = self.spec, self.ledger
        manifest = dict(spec.entry.manifest)
        transcript_path = self.env.run_dir.transcript(spec.episode_id)
        cost = self.env.price.cost(ledger.usage) if self.env.price else None
        record: dict[str, Any] = {
            "schema_version": 1, "kind": "episode", "benchmark_version": BENCHMARK_VERSION,
            "run_id": spec.run_id, "episode_id": spec.episode_id, "problem": spec.entry.id, "track": spec.track,
            "domain": getattr(spec.entry, "domain", manifest.get("domain")),
            "level": getattr(spec.entry, "level", manifest.get("level")),
            "family": getattr(spec.entry, "family", manifest.get("family")),
            "harness": spec.harness, "model": spec.model, "attempt": spec.attempt,
            "status": self.status, "error": self.error, "verdict": verdict if self.status == "completed" else None,
            "turns": ledger.turns, "tokens": ledger.usage.to_dict(),
            "cost_usd": None if cost is None else round(cost, 6),
            "tool_calls": ledger.tool_calls, "tools_used": ledger.tools_used(),
            "transcript": str(transcript_path.relative_to(self.env.run_dir.path)),
            "artifact": artifact, "started_at": self.started_at, "finished_at": _now(),
            "wall_s": round(ledger.wall_s, 3),
        }
        if self.status == "infra_error" and verdict is not None:
            record["infra_verdict"] = verdict  # kept for diagnosis; not a score
        transcript = {
            "run_id": spec.run_id, "episode_id": spec.episode_id, "problem": spec.entry.id,
            "harness": spec.harness, "model": spec.model, "attempt": spec.attempt,
            "status": self.status, "error": self.error, "messages": self.messages,
            "calls": ledger.calls, "retries": list(getattr(self.agent, "retry_log", []) or []),
            "tool_calls": self.tool_log, "internal_error": self.internal_error, "artifact": {**artifact, "code": self.workspace.submitted} if artifact else None,
        }
        self.env.run_dir.write_transcript(spec.episode_id, transcript)
        return record


def run_episode(spec: EpisodeSpec, agent: Agent, env: EpisodeEnv) -> dict[str, Any]:
    """Run one episode and return its record (written to disk by the caller)."""
    return Episode(spec, agent, env).run()
