"""`python -m orchestrator <command>`: a thin dispatcher with lazy imports.

Each command lives in its stage's module, which provides
`configure(parser: argparse.ArgumentParser) -> None` and
`main(args: argparse.Namespace) -> int`. Errors the user can fix (bad id, unreadable
file, invalid manifest) are `UserError`: one line on stderr, exit code 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from orchestrator.errors import UserError

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("orchestrator.catalog", "list problems and translation tasks"),
    "validate": ("orchestrator.validate", "check every manifest against its schema and beyond"),
    "eval": ("orchestrator.scoring.pipeline", "score one submission: static analysis, correctness, stress, timing"),
    "calibrate": ("orchestrator.calibrate", "measure a reference's fp32-vs-fp64 drift at a shape"),
    "demo": ("orchestrator.demo", "score the built-in oracle solutions of every problem (the README's main job)"),
    "run": ("orchestrator.agent.run", "evaluate a model on a track with a harness"),
    "rescore": ("orchestrator.agent.rescore", "re-score the final artifacts of a run without the model"),
    "report": ("orchestrator.report", "tables, plots and exports from result directories"),
    "images": ("orchestrator.images", "build, push, pull, list and clean the sandbox images"),
    "sandbox": ("orchestrator.sandbox.commands", "sandbox maintenance (prune leftover containers)"),
    "translation": ("orchestrator.translation.commands", "fetch, verify and build translation-track sources"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator",
        description="PopcornBench: evaluate GPU kernels written by language models.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            try:
                importlib.import_module(module).configure(p)
            except ImportError as exc:
                if only == name:
                    raise UserError(f"command {name!r} is not available: {exc}") from exc
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser = build_parser(command if command in COMMANDS else None)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        return int(importlib.import_module(COMMANDS[args.command][0]).main(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
