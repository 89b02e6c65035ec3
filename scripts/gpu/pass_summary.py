"""Summarize a (possibly resumed) pass: episodes, verdicts, the pass's wall time as the sum of its
segments, and where the time went, stage by stage, summed over episodes.

    python3 scripts/gpu/pass_summary.py RESULTS/RUN_ID SEGMENTS.txt [--track-size N]
        [--rows OUT.jsonl --label TEXT --commit SHA]

`--rows` also writes one row per episode (docs/verification-data/*-pass*.jsonl): its
stages' wall times and lock waits, its GPU holds, counters and speedup. popcorn2_pass.sh reads
those rows' episode times back to start a fresh pass longest-first.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tabulate import tabulate  # noqa: E402

from orchestrator.executors.gpus import held_seconds  # noqa: E402

STAGES = ("static_analysis", "load", "correctness", "stress", "timing", "counters")


def stage_seconds(verdict: dict, key: str | None = None) -> dict[str, float]:
    """Each stage's wall time (or, with `key`, that field, e.g. lock_wait_s) in one verdict."""
    out = {}
    for name in STAGES:
        st = (verdict or {}).get("stages", {}).get(name) or {}
        seconds = st.get(key) if key else st.get("stage_wall_s", st.get("wall_s"))
        if isinstance(seconds, (int, float)):
            out[name] = float(seconds)
    return out


def episode_row(e: dict, label: str, commit: str) -> dict:
    """One episode of the pass as docs/verification-data keeps it."""
    verdict = e.get("verdict") or {}
    stages = verdict.get("stages") or {}
    timing = stages.get("timing") or {}
    trials = [t for name in ("correctness", "stress") for t in (stages.get(name) or {}).get("trials", [])]
    placement = e.get("placement") or {}
    return {"segment": label, "commit": commit, "problem": e.get("problem"),
            "status": verdict.get("status", e.get("status")), "failure_class": verdict.get("failure_class"),
            "started_at": e.get("started_at"), "finished_at": e.get("finished_at"), "episode_wall_s": e.get("wall_s"),
            "gpu_scoring_s": placement.get("gpu_scoring_s"), "gpu_spans": placement.get("gpu_spans"),
            "stage_wall_s": stage_seconds(verdict), "stage_lock_wait_s": stage_seconds(verdict, "lock_wait_s"),
            "timing_setup_s": timing.get("setup_s"),
            "trial_wall_s": round(sum(t.get("wall_s", 0) for t in trials), 2),
            "retried_alone": sum(1 for t in trials if t.get("retried_alone")),
            "candidate_restarted": sum(1 for t in trials if t.get("candidate_restarted")),
            "flags": verdict.get("flags") or [],
            "counters": (stages.get("counters") or {}).get("status"),
            "ncu_kernel_ms": ((stages.get("counters") or {}).get("metrics") or {}).get("kernel_time_ms"),
            "ncu_profiled_s": (stages.get("counters") or {}).get("profiled_s"),
            "ncu_lock_wait_s": (stages.get("counters") or {}).get("profiled_lock_wait_s"),
            "reference_ms": (timing.get("reference") or {}).get("median_ms"),
            "candidate_ms": (timing.get("candidate") or {}).get("median_ms"),
            "speedup": verdict.get("speedup"), "speedup_ci95": timing.get("speedup_ci95")}


def gpu_busy(samples: str) -> str:
    """One line on nvidia-smi's samples: how busy the GPUs were (mean utilization, the share of
    samples at 0 %) and their peak memory. Lines that do not parse (a missing nvidia-smi) are skipped."""
    busy, memory = [], []
    for line in samples.splitlines():
        fields = [f.strip() for f in line.split(",")]
        try:
            busy.append(float(fields[1].removesuffix("%").strip()))
            memory.append(float(fields[2].removesuffix("MiB").strip()))
        except (IndexError, ValueError):
            continue
    if not busy:
        return "GPU samples: none parsed"
    idle = 100 * sum(1 for b in busy if b == 0) / len(busy)
    return (f"GPU samples ({len(busy)}): {sum(busy) / len(busy):.0f} % busy on average, at 0 % in {idle:.0f} % of "
            f"them; memory peak {max(memory):,.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("segments", type=Path, help="one wall time in seconds per line (one per call)")
    parser.add_argument("--track-size", type=int, default=34, help="episodes a whole pass has (Popcorn2: 34)")
    parser.add_argument("--rows", type=Path, help="also write one JSON row per episode here")
    parser.add_argument("--label", default="", help="--rows: what the rows' `segment` field says (the call, the setting)")
    parser.add_argument("--commit", default="", help="--rows: the commit the pass ran at")
    parser.add_argument("--gpu-samples", type=Path, help="nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used "
                        "--format=csv,noheader lines taken during the pass (popcorn2_pass.sh's gpu_samples.csv)")
    args = parser.parse_args()
    episodes = [json.loads(line) for line in (args.run_dir / "episodes.jsonl").read_text().splitlines() if line.strip()] \
        if (args.run_dir / "episodes.jsonl").is_file() else []
    segments = [float(x) for x in args.segments.read_text().split()] if args.segments.is_file() else []
    status = Counter((e.get("verdict") or {}).get("status", e.get("status")) for e in episodes)
    totals: Counter = Counter()
    waits: Counter = Counter()  # judges from 2026-12-01 on say how much of a stage waited for the GPU lock
    setups: Counter = Counter()  # judges from the sixteenth session on make a timing's inputs under the shared hold
    for e in episodes:
        totals.update(stage_seconds(e.get("verdict")))
        waits.update(stage_seconds(e.get("verdict"), "lock_wait_s"))
        setups.update(stage_seconds(e.get("verdict"), "setup_s"))
    episode_s = sum(float(e.get("wall_s") or 0) for e in episodes)
    print(f"episodes {len(episodes)} of {args.track_size} ({dict(status)}); segments {len(segments)}: "
          f"{' + '.join(f'{s:.0f}' for s in segments)} = {sum(segments):.0f} s wall"
          + ("" if len(episodes) >= args.track_size else "  (pass not complete)"))
    rows = [(name, f"{totals[name]:.0f}", f"{waits[name]:.0f}" if name in waits else "-",
             f"{100 * totals[name] / episode_s:.1f} %" if episode_s else "-")
            for name in STAGES if name in totals]
    rows.append(("whole episodes", f"{episode_s:.0f}", f"{sum(waits.values()):.0f}" if waits else "-", "100 %"))
    print(tabulate(rows, headers=["stage", "seconds, summed over episodes", "of which waiting for the GPU lock",
                                  "share of episode time"]))
    gpus = sorted({g for e in episodes for g in (e.get("placement") or {}).get("gpus", [])})
    if gpus and segments:
        held = sum(held_seconds(episodes, g) for g in gpus)
        besides = [f"and {waits['timing']:.0f} s waiting for the GPU" if "timing" in waits else "waits included"]
        if setups:
            besides.append(f"{setups['timing']:.0f} s set-up beside other judges' trials")
        print(f"GPUs {gpus} held by some judge {held:.0f} s of {len(gpus)} x {sum(segments):.0f} s "
              f"({100 * held / (len(gpus) * sum(segments)):.1f} %); timing, alone, "
              f"{totals['timing'] - waits['timing'] - setups['timing']:.0f} s ({', '.join(besides)})")
    rows = [episode_row(e, args.label, args.commit) for e in episodes]
    profiled = [r["ncu_profiled_s"] for r in rows if r["ncu_profiled_s"] is not None]
    if profiled:
        print(f"ncu profiled ranges, each alone on its GPU: {sum(profiled):.0f} s over {len(profiled)} episodes "
              f"(longest {max(profiled):.0f} s)")
    ratios = sorted((r["candidate_ms"] / r["ncu_kernel_ms"], r["problem"]) for r in rows
                    if r["candidate_ms"] and r["ncu_kernel_ms"])
    if ratios:  # counters.TIME_FLOOR's margin: an honest candidate's timed median against ncu's kernel sum
        print(f"timed median over ncu's kernel time: lowest {ratios[0][0]:.2f} ({ratios[0][1]}), "
              f"median {ratios[len(ratios) // 2][0]:.2f}, over {len(ratios)} episodes")
    flagged = sorted({f"{r['problem']}: {flag}" for r in rows for flag in r["flags"]})
    if flagged:
        print("flags: " + "; ".join(flagged))
    if args.gpu_samples and args.gpu_samples.is_file():
        print(gpu_busy(args.gpu_samples.read_text()))
    if args.rows:
        args.rows.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
