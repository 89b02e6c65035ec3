"""`python -m orchestrator translation <fetch|verify|build|prompt|eval|pack> ...`

    fetch  [IDS]                 download (or copy from --pins-dir), verify and unpack every pin
    verify [IDS]                 validate manifests, then fetch and check every named path
    build  IDS [--side S]        build sides (a100, h100, candidate with --candidate FILE); prints times
    prompt ID [--out FILE]       the prompt a model gets
    eval   ID SOLUTION           score a candidate .cu file (JSON verdict on stdout)
    pack   DIR [IDS]             copy the verified archives into DIR, for machines without network

With no IDS, every task (`--track` narrows to translation-single or translation-multi).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from orchestrator.config import Settings
from orchestrator.errors import UserError
from orchestrator.translation import builds, sources
from orchestrator.translation.catalog import Task, find_task, iter_tasks


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="translation_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pins-dir", action="append", type=Path, default=[],
                       help="folder holding pinned archives (offline machines); repeatable")
        p.add_argument("--offline", action="store_true", help="never download; use the cache and --pins-dir")
        p.add_argument("--cache-dir", dest="cache_dir", type=Path, default=None)
        p.add_argument("--translation-dir", dest="translation_dir", type=Path, default=None)

    helps = {"fetch": "download (or copy from --pins-dir), verify and unpack every pin",
             "verify": "validate manifests, fetch the pins and check every named path"}
    for name, help_text in helps.items():
        p = sub.add_parser(name, help=help_text)
        p.add_argument("ids", nargs="*")
        p.add_argument("--track", choices=["translation-single", "translation-multi"])
        common(p)
    p = sub.add_parser("build", help="build the a100 baseline, the h100 reference and/or a candidate")
    p.add_argument("ids", nargs="*")
    p.add_argument("--track", choices=["translation-single", "translation-multi"])
    p.add_argument("--side", action="append", choices=list(builds.SIDES), help="default: a100 and h100")
    p.add_argument("--candidate", type=Path, help="the candidate .cu file (with --side candidate)")
    p.add_argument("--json", action="store_true", help="one JSON line per build")
    common(p)
    p = sub.add_parser("prompt", help="print the prompt of one task")
    p.add_argument("ids", nargs=1)
    p.add_argument("--out", type=Path)
    common(p)
    p = sub.add_parser("eval", help="score a candidate .cu file")
    p.add_argument("ids", nargs=1)
    p.add_argument("solution", type=Path)
    p.add_argument("--mode", choices=["compile", "check", "full"], default="full")
    p.add_argument("--seed", type=int)
    common(p)
    p = sub.add_parser("pack", help="copy verified archives into a folder to carry offline")
    p.add_argument("dest", type=Path)
    p.add_argument("ids", nargs="*")
    p.add_argument("--track", choices=["translation-single", "translation-multi"])
    common(p)


def _tasks(args: argparse.Namespace, settings: Settings) -> list[Task]:
    if args.ids:
        return [find_task(i, settings.translation_dir) for i in args.ids]
    tasks = iter_tasks(settings.translation_dir)
    track = getattr(args, "track", None)
    return [t for t in tasks if track is None or t.track == track]


def _prepare(task: Task, args: argparse.Namespace, settings: Settings) -> dict[str, Path]:
    return sources.prepare(task.manifest, settings.cache_dir, args.pins_dir, offline=args.offline)


def main(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    action = args.translation_command
    tasks = _tasks(args, settings)
    if action in ("fetch", "verify"):
        for task in tasks:
            roots = _prepare(task, args, settings)
            named = len(sources.required_paths(task.manifest))
            print(f"{task.id}: {len(roots)} pin(s) verified, {named} path(s) present"
                  + (" " + ", ".join(str(r) for r in roots.values()) if action == "fetch" else ""))
        return 0
    if action == "pack":
        args.dest.mkdir(parents=True, exist_ok=True)
        total = 0
        for task in tasks:
            for pin in sources.pins_of(task.manifest).values():
                archive = sources.fetch(pin, settings.cache_dir, args.pins_dir, offline=args.offline)
                target = args.dest / pin.file
                if not target.exists():
                    shutil.copyfile(archive, target)
                    total += pin.size
        print(f"packed {total / 2**20:.1f} MiB into {args.dest}")
        return 0
    if action == "build":
        return _build(tasks, args, settings)
    task = tasks[0]
    if action == "prompt":
        from orchestrator.translation.prompts import build_prompt

        text = build_prompt(task, _prepare(task, args, settings))
        if args.out:
            args.out.write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    if action == "eval":
        from orchestrator.translation.scoring import evaluate

        _prepare(task, args, settings)  # honours --pins-dir / --offline before scoring
        verdict = evaluate(task.id, args.solution, settings, mode=args.mode, seed=args.seed)
        print(json.dumps(verdict, indent=2, default=str))
        return 0 if verdict["status"] == "passed" else 1
    raise UserError(f"unknown action {action!r}")


def _build(tasks: list[Task], args: argparse.Namespace, settings: Settings) -> int:
    sides = args.side or ["a100", "h100"]
    if "candidate" in sides and args.candidate is None:
        raise UserError("--side candidate needs --candidate FILE")
    failed = 0
    for task in tasks:
        if task.manifest["glue"] != "complete":
            print(f"{task.id}: skipped (glue pending)")
            continue
        roots = _prepare(task, args, settings)
        for side in sides:
            result = builds.build(task, side, roots, settings.cache_dir,
                                  candidate=args.candidate if side == "candidate" else None)
            failed += not result.ok
            if args.json:
                print(json.dumps({"task": task.id, **result.to_dict()}))
            else:
                state = "cached" if result.cached else ("built" if result.ok else "FAILED")
                print(f"{task.id} {side}: {state} in {result.wall_s:.1f} s -> {result.library or result.log[-2000:]}")
    return 1 if failed else 0
