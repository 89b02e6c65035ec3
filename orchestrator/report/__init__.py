"""`python -m orchestrator report RUN_DIR [RUN_DIR ...]`: tables, plots and exports.

Reads `results/<run_id>/` directories (run.json + episodes.jsonl, every record checked
against schemas/result.schema.json) and prints or writes the report's figures; docs/report.md
defines each one. Heavy modules (numpy, jsonschema, matplotlib, pyarrow) are imported
only when the command runs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from orchestrator.errors import UserError

FORMATS = ("table", "csv", "json", "html")
GROUP_KEYS = ("run", "track", "harness", "model", "domain", "level", "family")
DEFAULT_BY = "track,harness"
PLOT_NAME = "pareto.png"


def _keys(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in GROUP_KEYS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown grouping {', '.join(unknown)}; choose from {', '.join(GROUP_KEYS)}")
    return list(dict.fromkeys(keys))


def _exports(text: str) -> list[str]:
    formats = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in formats if f not in ("jsonl", "parquet")]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(f"unknown export format {', '.join(unknown) or text!r}; choose jsonl, parquet")
    return list(dict.fromkeys(formats))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="result directories (results/<run_id>/)")
    parser.add_argument("--by", type=_keys, default=_keys(DEFAULT_BY),
                        help=f"group rows by these keys, comma-separated ({', '.join(GROUP_KEYS)}); "
                             f"default {DEFAULT_BY}; 'run' is added when several runs are given")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write files here (report.txt|csv files|report.json|index.html, and pareto.png) "
                             "instead of printing; html and --export default to RUN_DIR/report")
    parser.add_argument("--export", type=_exports, default=[], metavar="jsonl,parquet",
                        help="also write the episode records as a dataset file (episodes.jsonl, episodes.parquet)")


def main(args: argparse.Namespace) -> int:
    from orchestrator.report.figures import build, grouping, outcomes_of
    from orchestrator.report.load import load_runs
    from orchestrator.report.render import section_csv, to_csv, to_html, to_json, to_table

    runs = load_runs(args.runs)
    keys = grouping(args.by, len(runs))
    sections = build(runs, keys)
    meta = {"runs": [r.run_id for r in runs], "paths": [str(r.path) for r in runs],
            "benchmark_version": runs[0].benchmark_version, "by": keys}
    out: Path | None = args.out
    if out is None and (args.format == "html" or args.export):
        out = runs[0].path / "report"
    written: list[Path] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    if out is not None and (args.format == "html" or args.out is not None):
        written.append(_plot(outcomes_of(runs), out / PLOT_NAME))

    if args.format == "table":
        text = to_table(sections)
    elif args.format == "csv":
        text = to_csv(sections)
    elif args.format == "json":
        text = to_json(sections, meta)
    else:
        assert out is not None
        text = to_html(sections, meta, out, PLOT_NAME)

    if out is None:
        sys.stdout.write(text)
    elif args.format == "csv" and args.out is not None:
        for section in sections:
            written.append(out / f"{section.name}.csv")
            written[-1].write_text(section_csv(section), encoding="utf-8")
    elif args.format != "html" and args.out is None:
        sys.stdout.write(text)            # --export alone: the report still goes to the terminal
    else:
        name = {"table": "report.txt", "json": "report.json", "html": "index.html"}[args.format]
        written.append(out / name)
        written[-1].write_text(text, encoding="utf-8")

    if args.export:
        from orchestrator.report.export import export

        assert out is not None
        written += export(runs, args.export, out)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _plot(outcomes: list, path: Path) -> Path:  # type: ignore[type-arg]
    from orchestrator.report.plot import pareto_plot

    try:
        return pareto_plot(outcomes, path)
    except ImportError as exc:
        raise UserError(f"the Pareto plot needs matplotlib ({exc}); run scripts/install/report.sh") from exc


__all__ = ["configure", "main"]
