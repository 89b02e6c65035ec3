"""`python -m orchestrator rescore RUN`: score a run's submitted artifacts again, no model.

RUN is a run id under the results directory or a path to a run directory. Every episode
with an artifact is evaluated again (mode="full", fresh sandbox) with the run's scoring
settings from run.json (flags override them) and the same secret seed as at first
(derived from run.json's run seed), or with a new one (--fresh-seed).
The original episodes.jsonl is never modified: the re-scored records (all episodes,
unscored ones copied unchanged) go to RUN/rescore-<time>.jsonl, and a table compares
the old and the new verdicts.
"""
from __future__ import annotations

import argparse
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.agent.harness import derive_seed
from orchestrator.agent.records import RunDir
from orchestrator.errors import InfraError, UserError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run id (under the results directory) or a run directory")
    parser.add_argument("--fresh-seed", dest="fresh_seed", action="store_true",
                        help="draw new hidden stress shapes instead of the run's")
    parser.add_argument("--device", default=None, choices=["auto", "cpu", "cuda"])
    parser.add_argument("--sandbox", default=None, choices=["auto", "local", "docker"])
    parser.add_argument("--stress", type=int, default=None)
    parser.add_argument("--output", type=Path, default=None, help="where to write the records (default RUN/rescore-<time>.jsonl)")
    parser.add_argument("--quiet", action="store_true")


def _run_dir(settings: Any, run: str) -> RunDir:
    path = Path(run)
    candidates = [path, Path(settings.results_dir) / run]
    for candidate in candidates:
        if (candidate / "episodes.jsonl").is_file():
            return RunDir(candidate)
    raise UserError(f"no run at {run!r} (looked for episodes.jsonl in {', '.join(str(c) for c in candidates)})")


def rescore_record(record: dict[str, Any], run_dir: RunDir, settings: Any, seed: int) -> dict[str, Any]:
    from orchestrator import catalog
    from orchestrator.scoring import pipeline

    artifact = record.get("artifact") or {}
    out = dict(record)
    out["rescore"] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "previous_status": record.get("status"),
                      "previous_verdict_status": (record.get("verdict") or {}).get("status"),
                      "previous_speedup": (record.get("verdict") or {}).get("speedup")}
    path = run_dir.path / artifact["path"]
    if not path.is_file():
        out.update(status="infra_error", verdict=None, error=f"artifact {path} is missing")
        return out
    entry = catalog.find(settings, record["problem"])
    try:
        verdict = pipeline.evaluate(entry, path, settings, mode="full", seed=seed)
    except InfraError as exc:
        out.update(status="infra_error", verdict=None, error=f"rescore: {exc}")
        return out
    except Exception as exc:
        from orchestrator.sandbox.base import SandboxError

        if not isinstance(exc, SandboxError):
            raise
        out.update(status="infra_error", verdict=None, error=f"rescore: sandbox: {exc}")
        return out
    if verdict.get("failure_class") == "infra_error":
        out.update(status="infra_error", verdict=None, error=f"rescore: {verdict.get('failure_detail', '')}")
    else:
        out.update(status="completed", verdict=verdict, error=None)
    return out


def main(args: argparse.Namespace) -> int:
    from tabulate import tabulate
    from tqdm import tqdm

    from orchestrator.config import Settings

    run_dir = _run_dir(Settings.from_args(args), args.run)
    info = run_dir.read_run() if run_dir.exists() else {}
    # The run's own scoring settings (stress, timing, device, sandbox), unless a flag overrides them.
    from orchestrator.agent.run import NOT_RESUMED

    kept = {k: v for k, v in info.get("config", {}).items() if k in Settings.model_fields and k not in NOT_RESUMED}
    given = {k: v for k, v in vars(args).items() if v is not None and k in Settings.model_fields}
    settings = Settings(**{**kept, **given})
    run_seed = info.get("run_seed")
    records = run_dir.load_records()
    if not records:
        raise UserError(f"{run_dir.episodes} holds no episode record")
    output = args.output or run_dir.path / f"rescore-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    scored = [r for r in records if (r.get("artifact") or {}).get("path")]
    print(f"rescoring {len(scored)} of {len(records)} episodes of {run_dir.path} -> {output}", file=sys.stderr)
    rows = []
    with tqdm(total=len(scored), unit="episode", disable=args.quiet, file=sys.stderr) as bar:
        for record in records:
            if not (record.get("artifact") or {}).get("path"):
                run_dir.append_record(record, output)
                continue
            if args.fresh_seed or run_seed is None:
                seed = secrets.randbits(63)
            else:
                seed = derive_seed(int(run_seed), record["episode_id"])
            new = rescore_record(record, run_dir, settings, seed)
            run_dir.append_record(new, output)
            old_v, new_v = record.get("verdict") or {}, new.get("verdict") or {}
            rows.append([record["episode_id"], old_v.get("status", record.get("status")),
                         new_v.get("status", new.get("status")), _fmt(old_v.get("speedup")), _fmt(new_v.get("speedup"))])
            bar.update(1)
    print(tabulate(rows, headers=["episode", "before", "after", "speedup before", "speedup after"]))
    changed = sum(1 for r in rows if r[1] != r[2])
    print(f"\n{len(rows)} re-scored, {changed} changed status; records in {output}")
    return 3 if any(r[2] == "infra_error" for r in rows) else 0


def _fmt(value: Any) -> str:
    return f"{value:.3g}x" if isinstance(value, (int, float)) else "-"
