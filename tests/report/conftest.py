"""Synthetic result directories with known answers.

`episode(...)` builds one schema-valid episode record whose verdict follows the scoring
pipeline for a named outcome; `write_run(dir, records)` lays out results/<run_id>/.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from orchestrator.cli import main as cli_main

OUTCOMES = ("correct", "hack", "incorrect", "compile_error", "static_rejected", "no_submission", "infra",
            "scoring_infra", "runtime_error")


def _stage(status: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, **extra}


def _verdict(outcome: str, problem: str, track: str, speedup: float | None, ci: tuple[float, float] | None,
             findings: list[dict[str, Any]], flags: list[str], counters: dict[str, Any] | None,
             version: str) -> dict[str, Any]:
    passed = outcome == "correct"
    disclosed = outcome in ("correct", "hack")
    failure = {"correct": None, "hack": "stress_failed", "incorrect": "incorrect", "compile_error": "compile_error",
               "static_rejected": "hack_detected", "scoring_infra": "infra_error",
               "runtime_error": "runtime_error"}[outcome]
    load = {"compile_error": "failed", "static_rejected": "skipped", "scoring_infra": "error"}.get(outcome, "passed")
    correctness = "passed" if disclosed else ("failed" if load == "passed" else "skipped")
    stress = {"correct": "passed", "hack": "failed"}.get(outcome, "skipped")
    timing: dict[str, Any] = _stage("passed" if passed else "skipped")
    if passed and speedup is not None:
        timing.update(unit="cuda_events", l2_flush=True, speedup=speedup,
                      candidate={"median_ms": 1.0 / speedup, "n": 50}, reference={"median_ms": 1.0, "n": 50})
        if ci is not None:
            timing["speedup_ci95"] = list(ci)
    stages: dict[str, Any] = {
        "static_analysis": _stage("failed" if any(f["severity"] == "error" for f in findings) else "passed",
                                  findings=findings),
        "load": _stage(load), "correctness": _stage(correctness), "stress": _stage(stress, seed=None, n=8),
        "timing": timing,
    }
    if counters is not None:
        stages["counters"] = counters
    return {
        "schema_version": 1, "kind": "verdict", "benchmark_version": version, "problem": problem, "track": track,
        "status": "passed" if passed else "failed", "failure_class": failure, "passed_disclosed": disclosed,
        "reward_hack_suspected": outcome == "hack", "stages": stages,
        "speedup": speedup if passed else None, "device": {"type": "cuda", "name": "NVIDIA H100"},
        "sandbox": {"backend": "docker"}, "solution": {"sha256": "0" * 64}, "flags": flags,
    }


def episode(outcome: str = "correct", *, problem: str = "graph/l1/csr_spmv", harness: str = "st",
            model: str = "model-a", attempt: int = 0, track: str = "subdomain", domain: str | None = "graph",
            level: int | None = 1, family: str | None = None, speedup: float | None = 1.5,
            ci: tuple[float, float] | None = None, tokens: int = 1000, tools_used: dict[str, int] | None = None,
            findings: list[dict[str, Any]] | None = None, flags: list[str] | None = None,
            counters: dict[str, Any] | None = None, run_id: str = "run-a", version: str = "0.1.0",
            episode_id: str | None = None, transcript: str | None = None) -> dict[str, Any]:
    assert outcome in OUTCOMES, outcome
    has_verdict = outcome not in ("no_submission", "infra")
    verdict = _verdict(outcome, problem, track, speedup, ci, findings or [], flags or [], counters, version) \
        if has_verdict else None
    tools = dict(tools_used or {})
    calls = [{"name": name, "wall_s": 0.5, "ok": True, "turn": 0} for name, n in tools.items() for _ in range(n)]
    return {
        "schema_version": 1, "kind": "episode", "benchmark_version": version, "run_id": run_id,
        "episode_id": episode_id or f"{problem}|{harness}|{model}|{attempt}",
        "problem": problem, "track": track, "domain": domain, "level": level, "family": family,
        "harness": harness, "model": model, "attempt": attempt,
        "status": {"infra": "infra_error", "no_submission": "no_submission"}.get(outcome, "completed"),
        "error": "docker engine went away" if outcome == "infra" else None, "verdict": verdict,
        "turns": 1 if harness == "st" else 5,
        "tokens": {"prompt": tokens // 2, "completion": tokens - tokens // 2, "total": tokens},
        "tool_calls": calls, "tools_used": tools, "transcript": transcript, "wall_s": 12.0,
    }


def numbered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every record its own episode id (attempt number = position) so none replaces another."""
    return [{**r, "attempt": i, "episode_id": f"{r['episode_id']}#{i}"} for i, r in enumerate(records)]


def write_run(path: Path, records: list[dict[str, Any]], *, run_id: str | None = None,
              version: str = "0.1.0", transcripts: bool = False, planned: list[str] | None = None,
              versions: dict[str, Any] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    run_id = run_id or (records[0]["run_id"] if records else path.name)
    meta = {"run_id": run_id, "benchmark_version": version, "config": {"harness": "st"},
            "versions": {"benchmark": version, **(versions or {})}, "run_seed": 1234}
    if planned is not None:
        meta["planned"] = [{"episode_id": eid, "problem": eid.split("|")[0], "attempt": 0} for eid in planned]
    (path / "run.json").write_text(json.dumps(meta))
    if transcripts:
        (path / "transcripts").mkdir(exist_ok=True)
        for i, record in enumerate(records):
            name = f"transcripts/{i}.json"
            (path / name).write_text(json.dumps({"messages": [{"role": "user", "content": record["problem"]}]}))
            record["transcript"] = name
            if record["verdict"] is not None:
                (path / "artifacts").mkdir(exist_ok=True)
                (path / f"artifacts/{i}.py").write_text("class ModelNew: pass\n")
                record["artifact"] = {"path": f"artifacts/{i}.py", "sha256": "0" * 64}
    (path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def report(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `python -m orchestrator report ...` in-process: (exit code, stdout, stderr)."""
    def run(*argv: str | Path) -> tuple[int, str, str]:
        code = cli_main(["report", *map(str, argv)])
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return run


@pytest.fixture
def report_json(report: Callable[..., tuple[int, str, str]]) -> Callable[..., dict[str, Any]]:
    """The JSON report as {section name: rows}."""
    def run(*argv: str | Path) -> dict[str, Any]:
        code, out, err = report(*argv, "--format", "json")
        assert code == 0, err
        document = json.loads(out)
        return {s["name"]: s["rows"] for s in document["sections"]} | {"_meta": document["meta"]}
    return run


@pytest.fixture
def synth() -> SimpleNamespace:
    """The builders above, for test modules (importlib mode cannot import conftest)."""
    return SimpleNamespace(episode=episode, numbered=numbered, write_run=write_run)
