"""One progress bar for a run (tqdm: done/total, episodes per hour, ETA) and a summary
of outcomes by class at the end."""
from __future__ import annotations

import collections
import sys
import threading
from typing import Any, Iterable, Mapping


def outcome(record: Mapping[str, Any]) -> str:
    """passed, a verdict failure class (incorrect, stress_failed, ...), or the episode status
    when nothing was scored (no_submission, limit_reached, infra_error)."""
    status = record.get("status")
    if status != "completed":
        return str(status)
    verdict = record.get("verdict") or {}
    if verdict.get("status") == "passed":
        return "passed"
    return str(verdict.get("failure_class") or "failed")


def failures_by_class(records: Iterable[Mapping[str, Any]]) -> str:
    counts = collections.Counter(outcome(r) for r in records)
    passed = counts.pop("passed", 0)
    if not counts:
        return f"{passed} passed, no failures"
    parts = ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{passed} passed; failures by class: {parts}"


class Progress:
    """Thread-safe; `update` once per finished episode, `lost` for a lost worker (retried)."""

    def __init__(self, total: int, desc: str, quiet: bool = False):
        from tqdm import tqdm

        self.counts: collections.Counter[str] = collections.Counter()
        self.lost_workers = 0
        self._lock = threading.Lock()
        self.bar = tqdm(total=total, desc=desc[:40], unit="ep", disable=quiet, file=sys.stderr, dynamic_ncols=True)

    def update(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self.counts[outcome(record)] += 1
            self.bar.set_postfix_str(self._postfix(), refresh=False)
            self.bar.update(1)

    def lost(self) -> None:
        with self._lock:
            self.lost_workers += 1
            self.bar.set_postfix_str(self._postfix(), refresh=True)

    def _postfix(self) -> str:
        elapsed = float(self.bar.format_dict.get("elapsed") or 0.0)
        per_hour = 3600.0 * self.bar.n / elapsed if elapsed > 0 else 0.0
        shown = [f"{per_hour:.0f} ep/h"] + [f"{k} {v}" for k, v in sorted(self.counts.items())]
        if self.lost_workers:
            shown.append(f"lost workers {self.lost_workers}")
        return ", ".join(shown)

    def close(self) -> None:
        self.bar.close()
