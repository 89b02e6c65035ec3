"""The order in which a run starts its episodes: longest first, from earlier runs.

Executors start episodes in the order they are given (local: the thread pool's queue;
Ray: the submission queue). In catalog order a long episode planned last starts last
and leaves the other GPUs idle while it runs: on the 2-GPU H200 (2026-11-30) six
Popcorn2 oracle episodes left one GPU idle 29 s of 127 s. Longest-processing-time-first
(LPT) on the same durations ends within 0.5 s of a perfect split.

Expected durations come from the records already under the results root: the median
`wall_s` of earlier episodes of the same problem, harness and model. Episodes with no
such record start first (an unknown one may be long, and starting it early is the safe
side of LPT); the others follow by descending expected time; ties keep the given order.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from orchestrator.agent.records import RunDir
from orchestrator.executors.work import Item

ORDERS = ("longest-first", "catalog")


def longest_first(items: Sequence[Item], expected_s: Mapping[str, float]) -> list[Item]:
    """`items` without an expected duration (keyed by problem) in their given order, then
    the others by descending expected duration; stable, so ties keep the given order."""
    unknown = [item for item in items if item["problem"] not in expected_s]
    known = [item for item in items if item["problem"] in expected_s]
    return unknown + sorted(known, key=lambda item: -expected_s[item["problem"]])


def _duration(record: Mapping[str, Any]) -> float | None:
    """The wall time of an episode that ran to its end; None for infra_error (the
    executor's or the sandbox's failure, not how long the episode takes) or no figure."""
    wall = record.get("wall_s")
    if record.get("status") == "infra_error" or isinstance(wall, bool) or not isinstance(wall, (int, float)):
        return None
    return float(wall) if math.isfinite(wall) and wall >= 0 else None


def recorded_durations(results_root: Path, harness: str, model: str) -> dict[str, float]:
    """Problem -> median wall_s of the records of `harness` and `model` in every run
    directory under `results_root` (`*/episodes.jsonl`)."""
    samples: dict[str, list[float]] = {}
    for episodes in sorted(Path(results_root).glob("*/episodes.jsonl")):
        for record in RunDir(episodes.parent).load_records():
            if record.get("harness") != harness or record.get("model") != model:
                continue
            wall = _duration(record)
            if wall is not None and isinstance(record.get("problem"), str):
                samples.setdefault(record["problem"], []).append(wall)
    return {problem: statistics.median(walls) for problem, walls in samples.items()}


def order_episodes(items: Sequence[Item], order: str, results_root: Path, harness: str,
                   model: str) -> tuple[list[Item], str]:
    """`items` in the order `--order` asks for, and one line saying what was done."""
    if order == "catalog":
        return list(items), f"order: {len(items)} episode(s) in catalog order (--order catalog)"
    if order != "longest-first":
        raise ValueError(f"unknown order {order!r} (known: {', '.join(ORDERS)})")
    expected = recorded_durations(results_root, harness, model)
    known = sum(1 for item in items if item["problem"] in expected)
    if not known:
        return list(items), (f"order: 0 of {len(items)} episodes have a duration from earlier runs: "
                             f"catalog order")
    return longest_first(items, expected), (f"order: {known} of {len(items)} episodes longest-first "
                                            f"from earlier runs' durations")
