"""Read result directories (`results/<run_id>/`) and check every record against the schema.

A run directory holds `run.json` and `episodes.jsonl`. Every line of `episodes.jsonl`
must be a `$defs/episode` record of `schemas/result.schema.json`; a line that is not
is a `UserError` naming the file and line. The one tolerated defect is a final line
cut short by an interrupted writer (no newline, not JSON): it is skipped with a warning,
because the runner rewrites that episode when it resumes.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "result.schema.json"
UNKNOWN_VERSION = "unknown"


@dataclass
class Run:
    path: Path
    run_id: str
    meta: dict[str, Any]                  # run.json
    episodes: list[dict[str, Any]]        # one record per episode id (the last one written)
    benchmark_version: str
    superseded: int = 0                   # earlier records of an episode id that was rewritten
    planned: int | None = None            # run.json's planned episodes, when it lists them
    infra_retried: int = 0                # infra errors moved to episodes.infra.jsonl and run again
    warnings: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def _episode_validator() -> Any:
    from jsonschema import Draft202012Validator

    schema = json.loads(SCHEMA_PATH.read_text())
    episode_schema = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/episode"}
    return Draft202012Validator(episode_schema)


def _first_error(record: Any) -> str | None:
    errors = list(_episode_validator().iter_errors(record))
    if not errors:
        return None
    # the deepest error names the field at fault; oneOf wrappers (verdict) otherwise hide it
    best = max(errors, key=lambda e: len(list(e.absolute_path)))
    for sub in sorted(best.context or [], key=lambda e: -len(list(e.absolute_path))):
        if sub.validator != "type" or len(list(sub.absolute_path)) > 0:
            best = sub
            break
    pointer = "/" + "/".join(str(p) for p in best.absolute_path)
    return f"{pointer}: {best.message}"


def _version_of(meta: dict[str, Any], episodes: list[dict[str, Any]], where: Path) -> str:
    versions: dict[str, Any] = meta["versions"] if isinstance(meta.get("versions"), dict) else {}
    declared = meta.get("benchmark_version") or versions.get("benchmark") or versions.get("popcornbench")
    seen = {e["benchmark_version"] for e in episodes if e.get("benchmark_version")}
    if declared:
        seen.add(str(declared))
    if len(seen) > 1:
        raise UserError(f"{where}: records of different benchmark versions in one run: {', '.join(sorted(seen))}")
    return seen.pop() if seen else UNKNOWN_VERSION


def read_episodes(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse and validate `episodes.jsonl`; returns (records in file order, warnings)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not text.endswith("\n"):
                warnings.append(f"{path}:{number}: ignoring an incomplete last line (interrupted write)")
                continue
            raise UserError(f"{path}:{number}: not JSON: {exc.msg} at column {exc.colno}") from exc
        problem = _first_error(record)
        if problem is not None:
            label = record.get("episode_id") if isinstance(record, dict) else None
            named = f" (episode {label})" if label else ""
            raise UserError(f"{path}:{number}{named}: not a valid episode record: {problem}")
        records.append(record)
    return records, warnings


def load_run(path: str | Path) -> Run:
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: not a directory")
    meta_path, episodes_path = run_dir / "run.json", run_dir / "episodes.jsonl"
    missing = [p.name for p in (meta_path, episodes_path) if not p.is_file()]
    if missing:
        raise UserError(f"{run_dir}: not a run directory (missing {' and '.join(missing)})")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{meta_path}:{exc.lineno}: not JSON: {exc.msg}") from exc
    if not isinstance(meta, dict):
        raise UserError(f"{meta_path}: expected a JSON object")
    records, warnings = read_episodes(episodes_path)
    latest: dict[str, dict[str, Any]] = {}
    for record in records:            # a resumed run rewrites an episode: the last record wins
        latest.pop(record["episode_id"], None)
        latest[record["episode_id"]] = record
    run_id = str(meta.get("run_id") or (records[0]["run_id"] if records else run_dir.name))
    planned = meta.get("planned")
    edited = _edited_checkout(meta)
    if edited:
        warnings.append(f"{meta_path}: {edited}")
    return Run(path=run_dir, run_id=run_id, meta=meta, episodes=list(latest.values()),
               benchmark_version=_version_of(meta, records, run_dir),
               superseded=len(records) - len(latest), warnings=warnings,
               planned=len(planned) if isinstance(planned, list) else None,
               infra_retried=_count_lines(run_dir / "episodes.infra.jsonl"))


def _edited_checkout(meta: dict[str, Any]) -> str | None:
    """A run whose code differed from the commit it names (run.json's versions.git_dirty): its
    figures are not that commit's, and a reader should know before comparing them."""
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    if versions.get("git_dirty") is not True:
        return None
    return f"the run's checkout had edits to tracked files beyond commit {str(versions.get('git'))[:12]} (versions.git_dirty)"


def _count_lines(path: Path) -> int:
    """Records kept for audit only (`--resume` moves infra errors there before re-running them)."""
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def load_runs(paths: list[str] | list[Path]) -> list[Run]:
    """Load every run; runs of different benchmark versions cannot be compared."""
    runs = [load_run(p) for p in paths]
    for run in runs:
        for warning in run.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    versions = {r.benchmark_version for r in runs}
    if len(versions) > 1:
        listed = ", ".join(f"{r.path} ({r.benchmark_version})" for r in runs)
        raise UserError(f"cannot compare runs of different benchmark versions: {listed}")
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        raise UserError(f"the same run given twice: {', '.join(sorted({i for i in ids if ids.count(i) > 1}))}")
    return runs
