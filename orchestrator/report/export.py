"""Episode records as a dataset file for publishing: JSONL or Parquet, one row per episode.

Every row has the same flat columns (what the report counts, with the run's benchmark
version), and `record`, the original episode record whole: an object in JSONL, a JSON
string in Parquet, so that nothing is lost and the columns stay typed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from orchestrator.report.load import Run
from orchestrator.report.outcome import Outcome, outcome_of

EXPORT_FORMATS = ("jsonl", "parquet")

# column -> pyarrow type name
COLUMNS: dict[str, str] = {
    "benchmark_version": "string", "run_id": "string", "episode_id": "string", "problem": "string",
    "track": "string", "domain": "string", "level": "int64", "family": "string", "harness": "string",
    "model": "string", "attempt": "int64", "status": "string", "failure_class": "string",
    "infra_error": "bool", "compiled": "bool", "passed_disclosed": "bool", "survived_stress": "bool",
    "correct": "bool", "reward_hack": "bool", "speedup": "float64", "speedup_ci95_low": "float64",
    "speedup_ci95_high": "float64", "tokens_prompt": "int64", "tokens_completion": "int64",
    "tokens_total": "int64", "turns": "int64", "tool_calls": "int64", "profiling_tools_used": "bool",
    "static_findings": "int64", "tensor_pipe_pct": "float64", "dram_throughput_pct": "float64",
    "sol_pct": "float64", "transcript": "string",
}


def dataset_row(outcome: Outcome, run: Run) -> dict[str, Any]:
    record = outcome.record
    verdict = record.get("verdict") or {}
    ci = outcome.speedup_ci95
    return {
        "benchmark_version": run.benchmark_version, "run_id": run.run_id, "episode_id": record["episode_id"],
        "problem": record["problem"], "track": record["track"], "domain": record.get("domain"),
        "level": record.get("level"), "family": record.get("family"), "harness": record["harness"],
        "model": record["model"], "attempt": record["attempt"], "status": record["status"],
        "failure_class": verdict.get("failure_class"), "infra_error": outcome.infra, "compiled": outcome.compiled,
        "passed_disclosed": outcome.passed_disclosed, "survived_stress": outcome.survived_stress,
        "correct": outcome.correct, "reward_hack": outcome.hack, "speedup": outcome.speedup,
        "speedup_ci95_low": ci[0] if ci else None, "speedup_ci95_high": ci[1] if ci else None,
        "tokens_prompt": record["tokens"]["prompt"], "tokens_completion": record["tokens"]["completion"],
        "tokens_total": record["tokens"]["total"], "turns": record["turns"],
        "tool_calls": len(record.get("tool_calls") or []), "profiling_tools_used": outcome.profiled,
        "static_findings": len(outcome.static_findings),
        "tensor_pipe_pct": outcome.counters.get("tensor_pipe_pct"),
        "dram_throughput_pct": outcome.counters.get("dram_throughput_pct"),
        "sol_pct": outcome.counters.get("sol_pct"), "transcript": record.get("transcript"),
    }


def dataset_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        for record in run.episodes:
            rows.append({**dataset_row(outcome_of(record, run.run_id), run), "record": record})
    return rows


def write_jsonl(runs: Sequence[Run], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for row in dataset_rows(runs):
            handle.write(json.dumps(row, sort_keys=False) + "\n")
    return path


def write_parquet(runs: Sequence[Run], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
    fields = [pa.field(name, types[kind]) for name, kind in COLUMNS.items()]
    schema = pa.schema([*fields, pa.field("record", pa.string())])
    rows = [{**row, "record": json.dumps(row["record"], sort_keys=True)} for row in dataset_rows(runs)]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def export(runs: Sequence[Run], formats: Sequence[str], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    writers = {"jsonl": write_jsonl, "parquet": write_parquet}
    return [writers[fmt](runs, out_dir / f"episodes.{fmt}") for fmt in formats]
