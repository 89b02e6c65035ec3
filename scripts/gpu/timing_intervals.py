"""Recompute the speedup interval of published timing samples, rounds first (run here, on the
rows a device call returned):

    python3 scripts/gpu/timing_intervals.py docs/verification-data/2026-11-30-s7-translation-timing-samples.jsonl

Each line is {"task", "timing"} with the verdict's timing stage. Records since the seventh
session carry `round_sizes`; older ones are split by the interleaving plan the judge followed
(first round ceil(iters / 5) samples, then equal rounds: `[6] + [per] * 19` for the 30-iteration
translation plan under the time budget). Prints, per task, the median ratio, the interval in
the record (a bootstrap over pooled samples) and timing.speedup_ci's (rounds, then samples).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.runner import timing  # noqa: E402

PLANS = ((6, 20), (6, 5), (10, 5), (10, 20))  # (first round, rounds) of the judges' plans so far


def split(side: dict) -> list[list[float]]:
    samples = side["samples_ms"]
    if side.get("round_sizes"):
        return timing.rounds({"times_ms": samples, "round_sizes": side["round_sizes"]})
    n = len(samples)
    for first, planned in PLANS:
        rest = n - first
        if rest > 0 and rest % (planned - 1) == 0:
            per = rest // (planned - 1)
            return [samples[:first]] + [samples[first + i * per:first + (i + 1) * per] for i in range(planned - 1)]
    return [samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="JSON lines with task and timing")
    args = parser.parse_args()
    print("| task | rounds | speedup | pooled CI (record) | rounds-first CI |")
    print("|---|---|---|---|---|")
    for path in args.files:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            t = row.get("timing") or {}
            cand, ref = t.get("candidate"), t.get("reference")
            if not cand or not ref or "samples_ms" not in cand:
                continue
            c, r = split(cand), split(ref)
            lo, hi = timing.speedup_ci(r, c)
            ratio = statistics.median(ref["samples_ms"]) / statistics.median(cand["samples_ms"])
            pooled = t.get("speedup_ci95") or [float("nan"), float("nan")]
            print(f"| {row.get('task') or row.get('problem')} | {len(c)} | {ratio:.3f} | "
                  f"[{pooled[0]:.3f}, {pooled[1]:.3f}] | [{lo:.3f}, {hi:.3f}] |")


if __name__ == "__main__":
    main()
