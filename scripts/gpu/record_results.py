"""Turn the JSON lines of GPU verification lanes into the repository's records (run here,
after a device call): every problem's `reference_h200_ms` in its manifest, and the
Markdown table of docs/verification.md printed to stdout.

    python3 scripts/gpu/record_results.py RESULTS.jsonl... [--write-manifests]

A row measured at another default shape than the manifest's current one is not written (and is
marked in the table); a row that does not say its shape only refreshes a non-null value.
Oracle rows (verify_core.py oracles) give the reference's median under the harness's
timing rules; reference rows (verify_core.py references) cover problems without an
oracle. The last row of a problem wins (later calls supersede earlier ones), except that
a passing oracle row is never replaced by a failing one.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.runner.shapes import default_shape  # noqa: E402


def load(paths: list[Path]) -> tuple[dict[str, dict], dict[str, dict]]:
    oracles: dict[str, dict] = {}
    references: dict[str, dict] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            pid = row.get("problem")
            if row.get("kind") == "oracle":
                if oracles.get(pid, {}).get("status") == "passed" and row["status"] != "passed":
                    continue
                oracles[pid] = row
            elif row.get("kind") == "reference" and row.get("default", {}).get("median_ms"):
                references[pid] = row
    return oracles, references


def reference_measure(pid: str, oracles: dict[str, dict], references: dict[str, dict]) -> tuple[float | None, dict | None]:
    """The reference's median and the default shape it was measured at (rows before 2026-11-30's
    fourth session do not say their shape: None)."""
    row = oracles.get(pid)
    if row and row.get("reference_ms"):
        return float(row["reference_ms"]), row.get("default_shape")
    ref = references.get(pid)
    return (float(ref["default"]["median_ms"]), ref["default"].get("shape")) if ref else (None, None)


def is_current(pid: str, shape: dict | None) -> bool | None:
    """Whether `shape` is the manifest's default today; None when the row did not say."""
    if shape is None:
        return None
    manifest = json.loads((REPO / "problems" / pid / "manifest.json").read_text())
    return shape == default_shape(manifest["shapes"], "cuda")


def write_manifest(pid: str, value: float, known_shape: bool) -> bool:
    """Set reference_h200_ms in place, keeping the file's formatting. A row that does not say its
    shape only refreshes a recorded value: a null means the default changed since (re-measure)."""
    path = REPO / "problems" / pid / "manifest.json"
    text = path.read_text()
    if not known_shape and json.loads(text).get("reference_h200_ms") is None:
        return False
    new, n = re.subn(r'"reference_h200_ms":\s*(null|[0-9.eE+-]+)', f'"reference_h200_ms": {value:.4g}', text)
    if n != 1:
        return False
    json.loads(new)
    path.write_text(new)
    return True


def fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def table(oracles: dict[str, dict], references: dict[str, dict]) -> str:
    rows = ["| problem | reference ms | oracle | stress | oracle ms | speedup [95 % CI] | DRAM/copy |",
            "|---|---|---|---|---|---|---|"]
    for pid in sorted(set(oracles) | set(references)):
        o = oracles.get(pid)
        ref, shape = reference_measure(pid, oracles, references)
        old = " (older default)" if is_current(pid, shape) is False else ""
        if o is None:
            rows.append(f"| {pid} | {fmt(ref, '.4g')}{old} | none | - | - | - | - |")
            continue
        ci = o.get("ci95") or [None, None]
        status = "passed" if o["status"] == "passed" else f"failed: {o['failure']}"
        speed = f"{fmt(o.get('speedup'))} [{fmt(ci[0])}, {fmt(ci[1])}]" if o.get("speedup") else "-"
        rows.append(f"| {pid} | {fmt(ref, '.4g')}{old} | {status} | {o.get('stress_n') or '-'} | "
                    f"{fmt(o.get('oracle_ms'), '.4g')} | {speed} | {fmt(o.get('dram_fraction'), '.3f')} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="JSON lines from verify_core.py (oracles, references)")
    parser.add_argument("--write-manifests", action="store_true", help="set reference_h200_ms in each manifest")
    args = parser.parse_args()
    missing = [p for p in args.results if not p.is_file()]
    if missing:
        print(f"error: {missing[0]}: no such file", file=sys.stderr)
        return 2
    oracles, references = load(args.results)
    if args.write_manifests:
        written = []
        for pid in sorted(set(oracles) | set(references)):
            ms, shape = reference_measure(pid, oracles, references)
            current = is_current(pid, shape)
            if ms and current is not False and write_manifest(pid, ms, known_shape=current is True):
                written.append(pid)
        print(f"reference_h200_ms written into {len(written)} manifests", file=sys.stderr)
    print(table(oracles, references))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
