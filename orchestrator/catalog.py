"""The catalog stage: every problem folder and translation task, and `list`.

A problem is found by its manifest: problems/<domain>/l<level>/<slug>/manifest.json.
Loading the catalog reads manifests only (never imports reference code); `validate`
goes further.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from orchestrator.errors import ManifestError, ProblemNotFound, UserError

TRACKS = ("subdomain", "popcorn2", "translation-single", "translation-multi")


@dataclass(frozen=True)
class Entry:
    id: str
    path: Path
    manifest: dict[str, Any]
    kind: str = "problem"  # "problem" | "translation"

    @property
    def domain(self) -> str | None:
        return self.manifest.get("domain")

    @property
    def level(self) -> int | None:
        return self.manifest.get("level", 5 if self.kind == "translation" else None)

    @property
    def popcorn2(self) -> bool:
        return bool(self.manifest.get("popcorn2"))

    @property
    def collectives(self) -> bool:
        return bool(self.manifest.get("collectives")) or self.manifest.get("track") == "translation-multi"

    @property
    def family(self) -> str | None:
        return self.manifest.get("family")

    @property
    def tracks(self) -> tuple[str, ...]:
        if self.kind == "translation":
            return (str(self.manifest["track"]),)
        return ("subdomain", "popcorn2") if self.popcorn2 else ("subdomain",)

    @property
    def track(self) -> str:
        """The track a verdict records: the most specific one."""
        return self.tracks[-1]

    @property
    def oracle(self) -> Path | None:
        found = sorted((self.path / "solutions").glob("oracle*"))
        return found[0] if found else None


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ManifestError(str(path), "", f"cannot be read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ManifestError(str(path), "", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ManifestError(str(path), "", "must be a JSON object")
    return data


def problem_entries(problems_dir: Path) -> list[Entry]:
    entries = []
    for manifest_path in sorted(Path(problems_dir).glob("*/l*/*/manifest.json")):
        manifest = read_manifest(manifest_path)
        folder_id = manifest_path.parent.relative_to(problems_dir).as_posix()
        entries.append(Entry(str(manifest.get("id", folder_id)), manifest_path.parent, manifest))
    return entries


def translation_entries(translation_dir: Path) -> list[Entry]:
    try:
        from orchestrator.translation.catalog import load_tasks
    except ImportError:
        return []
    if not Path(translation_dir).is_dir():
        return []
    return [Entry(t["id"], Path(t["path"]), t["manifest"], "translation") for t in load_tasks(translation_dir)]


def load_catalog(settings: Any) -> list[Entry]:
    return problem_entries(settings.problems_dir) + translation_entries(settings.translation_dir)


def select(entries: Iterable[Entry], track: str | None = None, domain: str | None = None,
           level: int | None = None, pattern: str | None = None, *,
           oracle: bool = False, single_gpu: bool = False) -> list[Entry]:
    """Entries matching every filter given; `oracle`: only those with an oracle solution of ours;
    `single_gpu`: only those that run on one GPU (no collectives)."""
    if track is not None and track not in TRACKS:
        raise UserError(f"unknown track {track!r} (known: {', '.join(TRACKS)})")
    out = []
    for e in entries:
        if track and track not in e.tracks:
            continue
        if domain and e.domain != domain:
            continue
        if level is not None and e.level != level:
            continue
        if pattern and not any(fnmatch.fnmatch(e.id, p.strip()) for p in pattern.split(",")):
            continue
        if (oracle and not e.oracle) or (single_gpu and e.collectives):
            continue
        out.append(e)
    return out


def find(settings: Any, problem_id: str) -> Entry:
    for e in load_catalog(settings):
        if e.id == problem_id:
            return e
    known = [e.id for e in load_catalog(settings)]
    close = [k for k in known if problem_id.split("/")[-1] in k]
    hint = f" (did you mean {', '.join(close[:3])}?)" if close else f" ({len(known)} known; see `list`)"
    raise ProblemNotFound(f"unknown problem {problem_id!r}{hint}")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--track", choices=TRACKS, help="only this track (popcorn2 is a subset of subdomain)")
    parser.add_argument("--domain", choices=["graph", "biology", "robotics", "probability"], help="only this domain")
    parser.add_argument("--level", type=int, choices=[1, 2, 3, 5], help="only this level (5: translation)")
    parser.add_argument("--problems", dest="pattern", help="glob(s) over ids, comma-separated")
    parser.add_argument("--oracle", action="store_true", help="only entries with an oracle solution of ours")
    parser.add_argument("--single-gpu", action="store_true", help="only entries that run on one GPU (no collectives)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    output.add_argument("--ids", action="store_true", help="only the ids, one per line (for xargs)")


def main(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from orchestrator.config import Settings

    entries = select(load_catalog(Settings.from_args(args)), args.track, args.domain, args.level, args.pattern,
                     oracle=args.oracle, single_gpu=args.single_gpu)
    if args.ids:
        print("\n".join(e.id for e in entries))
        return 0
    if args.json:
        for e in entries:
            print(json.dumps({"id": e.id, "title": e.manifest.get("title"), "tracks": list(e.tracks),
                              "domain": e.domain, "level": e.level, "family": e.family,
                              "collectives": e.collectives, "oracle": bool(e.oracle)}))
        return 0
    rows = [(e.id, e.manifest.get("title", ""), e.domain or e.family or "", e.level,
             "yes" if e.popcorn2 else "", "yes" if e.collectives else "", "yes" if e.oracle else "")
            for e in entries]
    print(tabulate(rows, headers=["id", "title", "domain/family", "level", "popcorn2", "multi-GPU", "oracle"]))
    n_p2 = sum(e.popcorn2 for e in entries)
    n_c = sum(e.collectives for e in entries)
    print(f"\n{len(entries)} entries ({n_p2} popcorn2, {n_c} multi-GPU)")
    return 0
