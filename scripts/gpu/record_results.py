"""Turn the JSON lines of GPU verification lanes into the repository's records (run here,
after a device call): every problem's `reference_h200_ms` in its manifest, and the
Markdown table of docs/verification.md printed to stdout.

    python3 scripts/gpu/record_results.py RESULTS.jsonl... [--write-manifests]

A row measured at another default shape than the manifest's current one is not written (and is
marked in the table); a row that does not say its shape only refreshes a non-null value.
Oracle rows (verify_core.py oracles) give the reference's median under the harness's
timing rules; reference rows (verify_core.py references) cover problems without an
oracle. The last row of a problem wins (later calls supersede earlier ones), except that
a passing oracle row is never replaced by a failing one. Rows of launch_bound.py (one call
per timed region, 10 calls) stand in where no oracle or reference row was measured at the
current default, and only for a GPU-bound reference: there one call's launches hide behind its
kernels as they do in the harness's regions of many calls (marked "one call" in the table).
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


def load(paths: list[Path]) -> tuple[dict[str, dict], dict[str, dict], dict[str, list[dict]]]:
    """Oracle rows and reference rows by problem (the last wins), and every launch_bound.py row
    by problem (several shapes each)."""
    oracles: dict[str, dict] = {}
    references: dict[str, dict] = {}
    single_calls: dict[str, list[dict]] = {}
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
            elif "busy_fraction" in row and row.get("median_ms"):
                single_calls.setdefault(pid, []).append(row)
            else:
                continue
            if is_current(pid, default_of(row)) is False:  # the default changed after every earlier row
                for earlier in (oracles.get(pid), references.get(pid)):
                    if earlier is not None and earlier is not row and default_of(earlier) is None:
                        earlier["_superseded"] = True
    return oracles, references, single_calls


def default_of(row: dict) -> dict | None:
    """The default shape a row says it measured (None: it does not say, or a candidate shape)."""
    if row.get("kind") == "oracle":
        return row.get("default_shape")
    if row.get("kind") == "reference":
        return row["default"].get("shape")
    return None if row.get("changes") else row.get("shape")


def reference_measure(pid: str, oracles: dict[str, dict], references: dict[str, dict],
                      single_calls: dict[str, list[dict]] | None = None) -> tuple[float | None, dict | None, str]:
    """The reference's median, the default shape it was measured at (rows before 2026-11-30's
    fourth session do not say their shape: None) and where it comes from: the oracle's row, else
    the reference's; where that one is stale (is_stale), a row at the current default (the
    reference's, then a GPU-bound one-call row)."""
    rows = [r for r in (oracles.get(pid), references.get(pid))
            if r is not None and (r["kind"] == "reference" or r.get("reference_ms"))]
    if rows and not is_stale(pid, rows[0]):
        return measure_of(rows[0])
    current = [measure_of(r) for r in rows[1:] if is_current(pid, default_of(r))] + one_call(pid, single_calls or {})
    return current[0] if current else (measure_of(rows[0]) if rows else (None, None, ""))


def measure_of(row: dict) -> tuple[float, dict | None, str]:
    """An oracle or reference row's (reference median, default shape, kind)."""
    ms = row["reference_ms"] if row["kind"] == "oracle" else row["default"]["median_ms"]
    return float(ms), default_of(row), row["kind"]


def one_call(pid: str, single_calls: dict[str, list[dict]]) -> list[tuple[float, dict, str]]:
    """The newest launch_bound.py row of a GPU-bound reference at the current default, if any."""
    for row in single_calls.get(pid, [])[::-1]:
        if row.get("verdict") == "gpu-bound" and is_current(pid, row.get("shape")):
            return [(float(row["median_ms"]), row["shape"], "one call")]
    return []


def is_current(pid: str, shape: dict | None) -> bool | None:
    """Whether `shape` is the manifest's default today; None when the row did not say."""
    if shape is None:
        return None
    manifest = json.loads((REPO / "problems" / pid / "manifest.json").read_text())
    return shape == default_shape(manifest["shapes"], "cuda")


def is_stale(pid: str, row: dict) -> bool:
    """An oracle or reference row measured at an older default: known so, or not saying its shape
    while a later row was measured at an older default (load marks it) or the manifest's value is
    null (nulled when its default changed)."""
    current = is_current(pid, default_of(row))
    if current is None and row.get("_superseded"):
        return True
    if current is None:
        manifest = json.loads((REPO / "problems" / pid / "manifest.json").read_text())
        return manifest.get("reference_h200_ms") is None
    return not current


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


def table(oracles: dict[str, dict], measures: dict[str, tuple], stale_oracles: set[str]) -> str:
    """`measures`: reference_measure() of every problem; `stale_oracles`: problems whose oracle
    row is stale (both taken before any manifest is written)."""
    rows = ["| problem | reference ms | oracle | stress | oracle ms | speedup [95 % CI] | DRAM/copy |",
            "|---|---|---|---|---|---|---|"]
    for pid in sorted(measures):
        o = oracles.get(pid)
        ref, shape, source = measures[pid]
        if ref is None:
            continue  # only launch-bound one-call rows, or rows at other shapes
        old = (" (older default)" if is_current(pid, shape) is False else "") + (" (one call)" if source == "one call" else "")
        if pid in stale_oracles and source != "oracle":
            old += "; oracle at an older default"
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
    parser.add_argument("results", nargs="+", type=Path, help="JSON lines from verify_core.py (oracles, references) and launch_bound.py")
    parser.add_argument("--write-manifests", action="store_true", help="set reference_h200_ms in each manifest")
    args = parser.parse_args()
    missing = [p for p in args.results if not p.is_file()]
    if missing:
        print(f"error: {missing[0]}: no such file", file=sys.stderr)
        return 2
    oracles, references, single_calls = load(args.results)
    measures = {pid: reference_measure(pid, oracles, references, single_calls)
                for pid in sorted(set(oracles) | set(references) | set(single_calls))}
    stale_oracles = {pid for pid, o in oracles.items() if is_stale(pid, o)}
    if args.write_manifests:
        written = []
        for pid, (ms, shape, _) in measures.items():
            current = is_current(pid, shape)
            if ms and current is not False and write_manifest(pid, ms, known_shape=current is True):
                written.append(pid)
        print(f"reference_h200_ms written into {len(written)} manifests", file=sys.stderr)
    print(table(oracles, measures, stale_oracles))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
