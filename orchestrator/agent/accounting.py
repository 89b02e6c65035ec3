"""What an episode spends: tokens per call and in total, tool wall time, turns, cost.

Limits (turns, tokens, wall time) are checked between turns: a call already made is
always counted, and the episode ends as `limit_reached` before the next one.
A price table is a JSON file of USD per million tokens:

    {"gpt-4o": {"prompt": 2.5, "cached": 1.25, "completion": 10.0}, "*": {...}}

Cached prompt tokens are billed at `cached` (default: the prompt price); reasoning
tokens are already part of the completion count, as the OpenAI API reports them.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.agent.client import ModelTurn, Usage
from orchestrator.errors import UserError


@dataclass(frozen=True)
class Limits:
    max_turns: int = 20
    max_tokens: int | None = None        # prompt + completion over the episode
    max_wall_s: float | None = None      # the whole episode, model and tools


@dataclass(frozen=True)
class Price:
    prompt: float
    completion: float
    cached: float | None = None

    def cost(self, usage: Usage) -> float:
        cached_price = self.prompt if self.cached is None else self.cached
        fresh = max(usage.prompt - usage.cached, 0)
        return (fresh * self.prompt + usage.cached * cached_price + usage.completion * self.completion) / 1e6


def load_price_table(path: Path | None) -> dict[str, Price]:
    if path is None:
        return {}
    try:
        raw = json.loads(Path(path).read_text())
        return {name: Price(float(p["prompt"]), float(p["completion"]),
                            None if p.get("cached") is None else float(p["cached"]))
                for name, p in raw.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"price table {path}: {exc}") from exc


def price_for(table: dict[str, Price], model: str) -> Price | None:
    return table.get(model) or table.get("*")


@dataclass
class Ledger:
    """Running totals of one episode."""

    limits: Limits
    started: float = field(default_factory=time.monotonic)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def add_turn(self, turn: ModelTurn) -> None:
        self.turns += 1
        self.usage.add(turn.usage)
        self.calls.append({"turn": self.turns, "wall_s": round(turn.wall_s, 3), "retries": turn.retries,
                           "finish_reason": turn.finish_reason, "usage_reported": turn.usage_reported,
                           **turn.usage.to_dict()})

    def add_tool(self, name: str, wall_s: float, ok: bool) -> None:
        self.tool_calls.append({"name": name, "wall_s": round(wall_s, 4), "ok": ok, "turn": self.turns})

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def tools_used(self) -> dict[str, int]:
        return dict(Counter(c["name"] for c in self.tool_calls))

    def exhausted(self) -> str | None:
        """Which limit stops the next turn, or None."""
        if self.turns >= self.limits.max_turns:
            return f"turn limit ({self.limits.max_turns}) reached"
        if self.limits.max_tokens is not None and self.usage.total >= self.limits.max_tokens:
            return f"token limit ({self.limits.max_tokens}) reached: {self.usage.total} used"
        if self.limits.max_wall_s is not None and self.wall_s >= self.limits.max_wall_s:
            return f"wall-time limit ({self.limits.max_wall_s:g} s) reached"
        return None

    def turns_left(self) -> int:
        return self.limits.max_turns - self.turns
