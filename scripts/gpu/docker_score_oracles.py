"""Score the oracle solutions of problems in their per-problem docker containers on GPUs,
the way the scoring pipeline does (problem folder + solution into the work dir, the
judge on stdin), and write one JSON record per problem. Used by docker_on_device.sh.

    python scripts/gpu/docker_score_oracles.py --lock images.lock.json --out scores.json \
        [--gpus 0] [--only 'graph/*'] [--budget-s 300]
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.images import read_lock, resolve_image  # noqa: E402
from orchestrator.runner.judge import parse_verdict  # noqa: E402
from orchestrator.sandbox.base import SandboxSpec, SandboxUnavailable, create  # noqa: E402


def problem_files(folder: Path) -> dict[str, bytes]:
    files = {}
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and rel.parts[0] not in ("solutions", "__pycache__") and not rel.name.startswith("test_"):
            files[f"problem/{rel.as_posix()}"] = path.read_bytes()
    return files


def score(problem_id: str, lock: Path, gpus: tuple[int, ...], stress: int) -> dict:
    ref, digest = resolve_image(problem_id, lock)
    folder = REPO / "problems" / problem_id
    nonce = os.urandom(16).hex()
    job = {"problem_dir": "/work/problem", "solution": "/work/solution.py", "device": "cuda:0", "mode": "full",
           "stress": stress, "trials": 3, "nonce": nonce}
    started = time.monotonic()
    with create("docker", SandboxSpec(image=ref, run_id="gpu-oracles", episode=problem_id, gpus=gpus,
                                      memory_bytes=64 << 30, cpus=8.0, pids=4096, shm_bytes=8 << 30)) as sb:
        sb.put_files({**problem_files(folder), "solution.py": (folder / "solutions" / "oracle.py").read_bytes()})
        result = sb.exec([sb.python, "-m", "orchestrator.runner.judge"], timeout_s=300,
                         stdin=json.dumps(job).encode())
        isolation = sb.isolation
    verdict = parse_verdict(result.stdout, nonce)
    record = {"problem": problem_id, "image": ref, "image_digest": digest, "isolation": isolation,
              "wall_s": round(time.monotonic() - started, 1), "exit": result.returncode,
              "timed_out": result.timed_out}
    if verdict is None:
        record["error"] = (result.stderr or result.stdout)[-3000:]
    else:
        record["failure_class"] = verdict.get("failure_class")
        record["failure_detail"] = (verdict.get("failure_detail") or "")[-1500:]
        record["stages"] = {k: {kk: vv for kk, vv in v.items() if kk in ("status", "message", "median_ms",
                                                                        "speedup", "ref_median_ms")}
                            for k, v in verdict.get("stages", {}).items()}
        record["device"] = verdict.get("device")
    return record


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpus", default="0")
    parser.add_argument("--only", default="*")
    parser.add_argument("--stress", type=int, default=2)
    parser.add_argument("--budget-s", type=float, default=300)
    args = parser.parse_args()
    gpus = tuple(int(g) for g in args.gpus.split(","))
    problems = [e["problem"] for e in read_lock(args.lock)["images"]
                if e.get("kind") == "problem" and fnmatch.fnmatch(e["problem"], args.only)
                and (REPO / "problems" / e["problem"] / "solutions" / "oracle.py").is_file()]
    deadline = time.monotonic() + args.budget_s
    records = []
    for problem_id in problems:
        if time.monotonic() > deadline:
            records.append({"problem": problem_id, "skipped": "time budget spent"})
            continue
        try:
            record = score(problem_id, args.lock, gpus, args.stress)
        except (SandboxUnavailable, Exception) as exc:  # one problem's infra failure must not stop the rest
            record = {"problem": problem_id, "infra_error": f"{type(exc).__name__}: {exc}"}
        records.append(record)
        print(json.dumps({k: record.get(k) for k in ("problem", "failure_class", "wall_s", "infra_error")}),
              flush=True)
        args.out.write_text(json.dumps(records, indent=1))
    passed = sum(1 for r in records if r.get("failure_class") is None and "stages" in r)
    attempted = sum(1 for r in records if "skipped" not in r)
    print(f"oracles scored in containers: {passed} passed of {attempted} attempted "
          f"({len(records) - attempted} skipped: time budget spent)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
