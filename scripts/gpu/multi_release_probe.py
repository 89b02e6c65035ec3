"""2-GPU probe (nvidia-h200-x2): does the ranks' release skew explain a multi-GPU library timing
itself at 1.19x? Scores the H100 reference of a multi-GPU translation task against itself
through the multi judge, alternately with the old release of timed iterations (the
multiprocessing barrier) and the new one (rankworker.SpinRelease), REPEATS times each, and
prints and writes ($OUT/multi_release_probe.json) per run: speedup, its interval, both
medians and IQRs, and each library's release skew.

Expected if the account holds: with "barrier", self-speedups scattered away from 1.0 and
release skews of tens of microseconds; with "spin", speedups within a few percent of 1.0,
skews of a few microseconds, lower medians and IQRs on both sides.

    python3 scripts/gpu/multi_release_probe.py [TASK_ID] [--repeats 3] [--gpus 0,1] [--pins-dir .carry/translation-pins]

Needs the task's h100 build (the tbuild lane leaves it in ./.cache on a warm machine; it is
built here otherwise) and NCCL_NVLS_ENABLE=0 (set here).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from orchestrator.config import Settings  # noqa: E402
from orchestrator.translation import builds, sources  # noqa: E402
from orchestrator.translation.catalog import find_task  # noqa: E402
from orchestrator.translation.scoring import run_judge  # noqa: E402


def probe_once(task, library: str, ipc: str, gpus: list[int], release: str, seed: int) -> dict:
    job = {"task_dir": str(task.path), "symbol": task.manifest["entry"]["symbol"], "world_size": len(gpus),
           "devices": [f"cuda:{g}" for g in gpus], "device": f"cuda:{gpus[0]}", "gpus": gpus, "mode": "full",
           "seed": seed, "libraries": {"candidate": library, "h100": library}, "trials": 1, "stress": 0,
           "timing": {"iters": 30, "warmup": 3, "input_sets": 4, "release": release}, "trial_timeout_s": 120,
           "ipc_helper": ipc, "gpu_lock": ",".join(f"/tmp/popcorn-gpu{g}.lock" for g in gpus)}
    result = run_judge(job, float(task.manifest["time_limits"]["total_s"]), None,
                       "orchestrator.translation.multijudge")
    timing = result.get("stages", {}).get("timing", {})
    return {"release": release, "failure": result.get("failure_class"),
            "detail": (result.get("failure_detail") or "")[:500], "speedup": timing.get("speedup"),
            "ci95": timing.get("speedup_ci95"),
            "candidate_ms": timing.get("candidate", {}).get("median_ms"),
            "candidate_iqr_ms": timing.get("candidate", {}).get("iqr_ms"),
            "reference_ms": timing.get("reference", {}).get("median_ms"),
            "reference_iqr_ms": timing.get("reference", {}).get("iqr_ms"),
            "release_skew_us": timing.get("release_skew_us")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("task", nargs="?", default="tr-vllm-custom-allreduce")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--pins-dir", type=Path, action="append", default=[Path(".carry/translation-pins")])
    args = ap.parse_args()
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    settings = Settings()
    task = find_task(args.task, Path(__file__).resolve().parents[2] / "translation")
    roots = sources.prepare(task.manifest, settings.cache_dir, args.pins_dir, offline=True)
    library = str(builds.build(task, "h100", roots, settings.cache_dir).library)
    ipc = str(builds.build_ipc_helper(settings.cache_dir))
    gpus = [int(g) for g in args.gpus.split(",")]
    rows = []
    for i in range(args.repeats):
        for release in ("barrier", "spin"):
            row = probe_once(task, library, ipc, gpus, release, seed=100 + i)
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = Path(os.environ.get("OUT", "/tmp/popcorn-probe-out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "multi_release_probe.json").write_text(json.dumps({"task": task.id, "gpus": gpus, "rows": rows}, indent=1))
    return 0 if all(r["failure"] is None for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
