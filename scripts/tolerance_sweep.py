"""Whether fp32 itself stays inside each problem's tolerance over hidden shapes (CPU).

A tolerance is calibrated at the largest shape (the manifest's `calibration`), but a hidden shape
can be small, and an output that shrinks with the shape (a residual, a difference of nearly equal
quantities) can fall to fp32's floor there, where the calibrated `rtol` no longer covers it
(pagerank_power_iteration's `resid`, fifteenth session). For every problem this draws stress
shapes as scoring on the H200 does, keeps those small enough for this CPU (the manifest's `bytes`
formula under `--max-bytes`, each run under `--shape-s`), runs the reference in float32 and in
float64, and judges the first against the second with the problem's own comparison: FAILS when
fp32 fails the tolerance, TIGHT when it fails half of it (two fp32 orders of operations can sit
on either side of fp64, so a correct kernel may then fail). Exit status 1 when any is flagged.

    python scripts/tolerance_sweep.py [--problems GLOB] [--seeds 3] [--stress 8] [--max-bytes 2e9] [--out FILE.jsonl]
"""
from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import signal
import sys
import time
from pathlib import Path
from typing import Iterator

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.runner.problem import load_problem  # noqa: E402
from orchestrator.runner.shapes import evaluate, stress_shapes  # noqa: E402
from orchestrator.testing import ProblemCase  # noqa: E402


class ShapeTimeout(BaseException):
    """Not an Exception: a problem's check_output turns any Exception into a failed comparison,
    and a shape the alarm cut is a skipped one (dls_ik_solver read as FAILS before)."""


def _on_alarm(signum, frame):  # noqa: ARG001
    raise ShapeTimeout()


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """ShapeTimeout after `seconds`; the caller's SIGALRM handler is back afterwards, also when
    the alarm fires as it is cancelled (the caller's `except ShapeTimeout` then takes it)."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.alarm(max(1, int(seconds)))
        yield
    finally:
        try:
            signal.alarm(0)
        finally:
            signal.signal(signal.SIGALRM, previous)


TOLERANCE_KEYS = ("atol", "rtol", "rel_norm_max", "rel_norm")


def scaled(tol: dict, factor: float) -> dict:
    """The tolerance with every bound (per output too) multiplied by `factor`."""
    out = {k: (v * factor if k in TOLERANCE_KEYS and isinstance(v, (int, float)) else v) for k, v in tol.items()}
    if isinstance(tol.get("per_output"), list):
        out["per_output"] = [scaled(p, factor) for p in tol["per_output"]]
    return out


def judge_shape(case: ProblemCase, shape: dict, tol: dict) -> tuple[bool, bool, str]:
    """The fp32 reference against the fp64 one at `shape`, with the problem's own comparison:
    (passes the tolerance, passes half of it, the message of the first it fails, else of the half one)."""
    inputs, ref32, ref64 = case.fp32_and_fp64(shape, seed=7)
    full = case.problem.compare(inputs, ref32, ref64, tol)
    half = case.problem.compare(inputs, ref32, ref64, scaled(tol, 0.5))
    return full.passed, half.passed, (half if full.passed else full).message


def sweep_problem(problem_dir: Path, seeds: int, stress: int, shape_s: float, max_bytes: float) -> list[dict]:
    case = ProblemCase(load_problem(problem_dir))
    manifest = case.manifest
    tol = manifest["tolerance"]
    if tol.get("metric", "allclose") not in ("allclose", "rel_norm"):
        return [{"problem": manifest["id"], "skipped": f"metric {tol.get('metric')}"}]
    if manifest.get("collectives"):
        return [{"problem": manifest["id"], "skipped": "collectives (a reference per rank)"}]
    shapes = []
    for seed in range(seeds):
        for shape in stress_shapes(manifest["shapes"], manifest.get("constraints", []), stress, seed, "cuda"):
            if shape not in shapes:
                shapes.append(shape)
    rows = []
    for shape in shapes:
        if float(evaluate(manifest["bytes"], shape)) > max_bytes:
            rows.append({"problem": manifest["id"], "shape": shape, "skipped": "over --max-bytes"})
            continue
        t0 = time.perf_counter()
        try:
            with time_limit(shape_s):
                full, half, message = judge_shape(case, shape, tol)
        except ShapeTimeout:
            rows.append({"problem": manifest["id"], "shape": shape, "skipped": f"over {shape_s:.0f} s"})
            continue
        except (MemoryError, RuntimeError) as exc:  # out of this host's memory (or a ulimit under it)
            if not isinstance(exc, MemoryError) and "alloc" not in str(exc).lower():
                raise
            rows.append({"problem": manifest["id"], "shape": shape, "skipped": "out of host memory"})
            continue
        rows.append({"problem": manifest["id"], "shape": shape, "passes": full, "passes_half": half,
                     "message": message, "wall_s": round(time.perf_counter() - t0, 2)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="*", help="glob over problem ids (default: all)")
    parser.add_argument("--seeds", type=int, default=3, help="stress-shape seeds per problem (default 3)")
    parser.add_argument("--stress", type=int, default=8, help="shapes per seed, as scoring draws them (default 8)")
    parser.add_argument("--shape-s", type=float, default=60, help="skip a shape whose two runs take longer (default 60)")
    parser.add_argument("--max-bytes", type=float, default=2e9,
                        help="skip a shape whose manifest `bytes` (the reference's traffic) is above this (default 2e9)")
    parser.add_argument("--out", type=Path, help="also write every row here (JSON lines)")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1] / "problems"
    dirs = [p.parent for p in sorted(root.glob("*/*/*/manifest.json"))
            if fnmatch.fnmatch(str(p.parent.relative_to(root)), args.problems)]
    if not dirs:
        print(f"tolerance_sweep: no problem matches {args.problems!r}", file=sys.stderr)
        return 2
    out = args.out.open("w") if args.out else None
    flagged = 0
    for d in dirs:
        rows = sweep_problem(d, args.seeds, args.stress, args.shape_s, args.max_bytes)
        if out:
            out.writelines(json.dumps(r) + "\n" for r in rows)
            out.flush()
        measured = [r for r in rows if "passes" in r]
        skipped = len(rows) - len(measured)
        if not measured:
            print(f"{rows[0]['problem'] if rows else d.name}: skipped ({rows[0].get('skipped') if rows else 'no shapes'})")
            continue
        failing = [r for r in measured if not r["passes"]]
        tight = [r for r in measured if r["passes"] and not r["passes_half"]]
        verdict = "FAILS" if failing else "TIGHT" if tight else "ok"
        flagged += bool(failing or tight)
        first = (failing or tight or [None])[0]
        detail = f"; {first['message']} at {first['shape']}" if first else ""
        more = f", {skipped} skipped" if skipped else ""
        print(f"{measured[0]['problem']:55s} {verdict:5s} {len(measured)} shapes{more}{detail}", flush=True)
    print(f"{flagged} problem(s) flagged: FAILS (fp32 fails its own tolerance against fp64) or TIGHT (it fails half of it)")
    return 1 if flagged else 0


if __name__ == "__main__":
    raise SystemExit(main())
