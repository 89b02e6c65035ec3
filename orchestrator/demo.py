"""`demo`: score the shipped oracle solution of every problem that has one.

The README's main job: local sandbox unless told otherwise, the GPU if there is one
(every single-GPU oracle), else the CPU (where Triton kernels run under
TRITON_INTERPRET=1 at the small `cpu_default` shapes, so one problem per domain and
level is scored unless --all or --problems says otherwise). Verdicts go to results/demo-<time>/verdicts.jsonl as they
finish (nothing is lost if the run is interrupted); a table closes the run.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problems", dest="pattern", help="glob(s) over problem ids, comma-separated (default: all)")
    parser.add_argument("--track", choices=["subdomain", "popcorn2"], default="subdomain")
    parser.add_argument("--all", action="store_true",
                        help="on a CPU, score every oracle (default there: one problem per domain and level)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: cuda if present, else cpu")
    parser.add_argument("--stress", type=int, help="hidden shapes per problem (default: 8 on a GPU, 2 on a CPU)")
    parser.add_argument("--sandbox", choices=["auto", "local", "docker"], default="local", help="default: local")
    parser.add_argument("--seed", type=int, help="stress seed (default: secret)")


def one_per_cell(entries: list[Any]) -> list[Any]:
    """The first Popcorn2 problem (else the first problem) of every domain x level: a CPU
    run of all oracles under the Triton interpreter takes over an hour on two cores."""
    chosen: dict[tuple[str, int], Any] = {}
    for e in sorted(entries, key=lambda e: (not e.popcorn2, e.id)):
        chosen.setdefault((e.domain, e.level), e)
    return sorted(chosen.values(), key=lambda e: e.id)


def table(records: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    rows = []
    for r in records:
        t = r["stages"].get("timing", {})
        ci = t.get("speedup_ci95")
        rows.append((r["problem"], r["status"], r["failure_class"] or "",
                     f"{t['candidate']['median_ms']:.4g}" if t.get("candidate") else "",
                     f"{t['reference']['median_ms']:.4g}" if t.get("reference") else "",
                     f"{r['speedup']:.3g}" if r.get("speedup") else "",
                     f"[{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "", f"{r['wall_s']:.0f}"))
    return tabulate(rows, headers=["problem", "status", "failure", "oracle ms", "reference ms", "speedup", "95% CI", "wall s"])


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from orchestrator.catalog import load_catalog, select
    from orchestrator.config import Settings
    from orchestrator.errors import UserError
    from orchestrator.scoring.pipeline import evaluate

    settings = Settings.from_args(args)
    device = settings.resolved_device()
    if args.stress is None:
        settings = settings.model_copy(update={"stress": 8 if device == "cuda" else 2})
    entries = select(load_catalog(settings), track=args.track, pattern=args.pattern, oracle=True, single_gpu=True)
    if device == "cpu" and not args.pattern and not args.all:
        entries = one_per_cell(entries)
    if not entries:
        raise UserError(f"no problem with an oracle solution matches {args.pattern or 'the catalog'}")
    out_dir = settings.results_dir / f"demo-{dt.datetime.now():%Y%m%d-%H%M%S}"
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"scoring {len(entries)} oracle solutions on {device} with the {settings.sandbox} sandbox "
          f"({settings.stress} hidden shapes each); records: {out_dir}/verdicts.jsonl", file=sys.stderr)
    records = []
    with open(out_dir / "verdicts.jsonl", "a") as sink:
        for entry in tqdm(entries, desc="oracles", unit="problem"):
            record = evaluate(entry, entry.oracle, settings)
            record.pop("candidate_log", None)
            records.append(record)
            sink.write(json.dumps(record, default=str) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
    print(table(records))
    passed = sum(r["status"] == "passed" for r in records)
    print(f"\n{passed}/{len(records)} oracle solutions passed on {device} "
          f"({'CPU timings: a functional check, not a speed figure' if device == 'cpu' else 'CUDA events'})")
    return 0 if passed == len(records) else 1
