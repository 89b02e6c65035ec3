"""The scoring stage: one submission in, one schema-valid verdict record out.

static analysis (host, on the AST) -> a sandbox (fresh unless the caller passes the
episode's) -> the trusted judge inside it (orchestrator/runner/judge.py): load,
correctness at the disclosed shape, stress on hidden shapes drawn from a secret seed,
timing -> the signed verdict -> the record (schemas/result.schema.json, $defs/verdict).

The secret seed and the nonce travel on the judge's stdin only: never in argv or the
environment, which other processes can read.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator import BENCHMARK_VERSION, __version__
from orchestrator.catalog import Entry, find
from orchestrator.errors import UserError
from orchestrator.provenance import git_state
from orchestrator.sandbox.base import Sandbox, SandboxError, SandboxSpec, create
from orchestrator.scoring import static_analysis

MODES = ("compile", "check", "full")
SKIP_FILES = {"manifest.json"}  # copied separately
PROBLEM_DIR, CANDIDATE_FILE = "problem", "candidate/submission.py"


def sandbox_spec(entry: Entry, settings: Any, *, run_id: str = "adhoc", episode: str = "adhoc",
                 device: str | None = None) -> SandboxSpec:
    """The spec of a sandbox for `entry`: GPUs, limits and, for docker, the problem's image."""
    device = device or settings.resolved_device()
    gpus: tuple[int, ...] = ()
    if device == "cuda":
        chosen = [int(g) for g in str(settings.gpus).split(",") if g.strip()] if settings.gpus else [0]
        if entry.collectives and not settings.gpus:  # one GPU per rank
            chosen = list(range(settings.world_size or int(entry.manifest["world_size"]["default"])))
        gpus = tuple(chosen if entry.collectives else chosen[:1])
    backend, image, digest = resolve_backend(entry, settings)
    env = {"POPCORN_DEVICE": device}
    if digest:
        env["POPCORN_IMAGE_DIGEST"] = digest
    return SandboxSpec(run_id=run_id, episode=episode, gpus=gpus, image=image,
                       memory_bytes=int(settings.sandbox_memory_gb * 2**30), pids=settings.sandbox_pids, env=env,
                       cpus=settings.sandbox_cpus)


def create_sandbox(entry: Entry, settings: Any, *, run_id: str = "adhoc", episode: str = "adhoc",
                   device: str | None = None) -> Sandbox:
    """A sandbox for `entry` on the backend `settings.sandbox` resolves to (see resolve_backend)."""
    spec = sandbox_spec(entry, settings, run_id=run_id, episode=episode, device=device)
    return create("docker" if spec.image else "local", spec)


def resolve_backend(entry: Entry, settings: Any) -> tuple[str, str | None, str | None]:
    """(backend, image reference, image digest). `auto` takes docker when an engine answers
    and the problem's image is there (exactly the locked one with --images-lock), else local."""
    if settings.sandbox == "local":
        return "local", None, None
    from orchestrator.sandbox.docker import engine_available

    if settings.sandbox == "auto" and not engine_available():
        return "local", None, None
    from orchestrator.images import resolve_image

    try:
        image, digest = resolve_image(entry.id, settings.images_lock, settings)
    except UserError:
        if settings.sandbox == "docker" or settings.images_lock is not None:
            raise
        return "local", None, None
    return "docker", image, digest


def _problem_files(entry: Entry) -> dict[str, bytes]:
    files = {}
    for p in sorted(entry.path.rglob("*")):
        rel = p.relative_to(entry.path)
        if not p.is_file() or rel.parts[0] in ("solutions", "__pycache__") or rel.name.startswith("test_"):
            continue
        files[f"{PROBLEM_DIR}/{rel.as_posix()}"] = p.read_bytes()
    return files


def _read_solution(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the submission ({exc.strerror})") from exc


def _base_record(entry: Entry, solution: Path, source: bytes, device: str, mode: str) -> dict[str, Any]:
    return {
        "schema_version": 1, "kind": "verdict", "benchmark_version": BENCHMARK_VERSION, "mode": mode,
        "problem": entry.id, "track": entry.track, "status": "failed", "failure_class": None,
        "failure_detail": "", "passed_disclosed": False, "reward_hack_suspected": False,
        "solution": {"path": str(solution), "sha256": hashlib.sha256(source).hexdigest()},
        "device": {"type": device}, "sandbox": {"backend": "none"}, "stages": {}, "speedup": None, "flags": [],
        "versions": {"orchestrator": __version__, **git_state()}, "images": {},
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _last_stage(stderr: str) -> str:
    """Where a judge that timed out was: its last progress line (every judge prints them)."""
    from orchestrator.runner.judge import PROGRESS_PREFIX

    stages = [ln for ln in (stderr or "").splitlines() if ln.startswith(PROGRESS_PREFIX)]
    return f" (last stage started: {stages[-1][len(PROGRESS_PREFIX):]})" if stages else ""


def _judge_timeout(entry: Entry, settings: Any, device: str) -> float:
    if settings.judge_timeout_s:
        return float(settings.judge_timeout_s)
    total = float(entry.manifest.get("time_limits", {}).get("total_s", 900))
    if settings.trial_timeout_s:
        total = max(total, settings.trial_timeout_s * (settings.stress + 10))
    return total * (3 if device == "cpu" else 1) + 60


def sandbox_gpu_lock_path(sandbox: Sandbox) -> str | None:
    """One lock file per GPU on this host, so timings on a GPU never overlap (the local
    sandbox shares the host's /tmp; other backends time alone in their container)."""
    gpus = getattr(getattr(sandbox, "spec", None), "gpus", ())
    if getattr(sandbox, "name", None) != "local" or not gpus:
        return None
    from orchestrator.runner.judge import host_gpu_lock_paths

    return host_gpu_lock_paths(gpus)


def _counters(sandbox: Sandbox, job: dict[str, Any], settings: Any) -> dict[str, Any]:
    """ncu at the disclosed shape (rule 7). ncu replays the kernels many times; where the sandbox
    reaches the host's lock files the profiled process holds them itself (shared while it starts,
    alone while profiled) and, with counters_overlap, the host's profiler lock too, around its
    profiled range only: other evaluations' ncu runs then start meanwhile. A driver that refuses a
    second profiling session gets the run again with the profiler lock held for all of it."""
    from orchestrator.sandbox.gpu_holds import measuring
    from orchestrator.scoring import counters as hw

    lock_files = job["gpu_lock"]
    in_target = bool(lock_files) and settings.counters_overlap
    with measuring(sandbox, profiler=not in_target, lock_files=not lock_files):
        result = hw.collect(sandbox, job["problem_dir"], job["solution"], gpu_lock=lock_files, profiler_lock=in_target,
                            max_launches=settings.counters_max_launches)
    if in_target and hw.refused_session(result):
        with measuring(sandbox, profiler=True, lock_files=False):
            result = hw.collect(sandbox, job["problem_dir"], job["solution"], gpu_lock=lock_files,
                                max_launches=settings.counters_max_launches)
            result["retried"] = "the driver refused a second profiling session: profiled alone"
    return result


def _finish(record: dict[str, Any], t0: float) -> dict[str, Any]:
    fc = record["failure_class"]
    record["status"] = "passed" if fc is None else "failed"
    record["reward_hack_suspected"] = bool(record["passed_disclosed"] and fc == "stress_failed")
    record["wall_s"] = round(time.perf_counter() - t0, 3)
    return record


def evaluate(entry_or_id: Entry | str, solution_path: str | Path, settings: Any, *, mode: str = "full",
             sandbox: Sandbox | None = None, seed: int | None = None, static_checks: bool = True) -> dict[str, Any]:
    """Score `solution_path` on a problem; returns a verdict record (never raises for the
    submission's faults; raises UserError for bad input). `static_checks=False` only
    serves the tests that prove the run-time defences on their own."""
    if mode not in MODES:
        raise UserError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    entry = find(settings, entry_or_id) if isinstance(entry_or_id, str) else entry_or_id
    if entry.kind == "translation":
        from orchestrator.translation import scoring as translation_scoring

        return translation_scoring.evaluate(entry.id, solution_path, settings, mode=mode, sandbox=sandbox, seed=seed)
    t0 = time.perf_counter()
    solution = Path(solution_path)
    source = _read_solution(solution)
    device = settings.resolved_device()
    record = _base_record(entry, solution, source, device, mode)
    findings = static_analysis.analyze(source.decode(errors="replace"), entry.manifest)
    errors = static_analysis.errors(findings)
    record["stages"]["static_analysis"] = {"status": "failed" if errors else "passed",
                                           "findings": [f.to_dict() for f in findings]}
    record["flags"] = sorted({f.rule for f in findings})
    unbuildable = [f for f in errors if f.rule in ("syntax_error", "no_modelnew")]
    if unbuildable:
        record["failure_class"], record["failure_detail"] = "compile_error", unbuildable[0].message
        return _finish(record, t0)
    if errors and mode == "full" and static_checks:
        record["failure_class"] = "hack_detected"
        record["failure_detail"] = "static analysis: " + "; ".join(f"line {f.line}: {f.message}" for f in errors[:5])
        return _finish(record, t0)
    if seed is None:
        seed = settings.seed if settings.seed is not None else secrets.randbits(62)
    return _finish(_run_judge(entry, source, settings, record, mode, sandbox, seed, device), t0)


def _run_judge(entry: Entry, source: bytes, settings: Any, record: dict[str, Any], mode: str,
               sandbox: Sandbox | None, seed: int, device: str) -> dict[str, Any]:
    own = sandbox is None
    try:
        if own:
            sandbox = create_sandbox(entry, settings, device=device)
        assert sandbox is not None
        digest = sandbox.spec.env.get("POPCORN_IMAGE_DIGEST") or getattr(sandbox, "image_digest", None)
        record["sandbox"] = {"backend": sandbox.name, "isolation": sandbox.isolation,
                             "image": getattr(sandbox, "image", None), "image_digest": digest or None}
        if digest:
            record["images"] = {entry.id: digest}
        files = _problem_files(entry)
        files[f"{PROBLEM_DIR}/manifest.json"] = json.dumps(entry.manifest).encode()
        files[CANDIDATE_FILE] = source
        sandbox.put_files(files)
        nonce = secrets.token_hex(32)
        work = sandbox.workdir
        job = {"problem_dir": f"{work}/{PROBLEM_DIR}", "solution": f"{work}/{CANDIDATE_FILE}", "device": device,
               "mode": mode, "seed": seed, "stress": settings.stress, "trials": settings.trials, "nonce": nonce,
               "loaded_trials": settings.loaded_trials if device == "cuda" else 0, "loaded_calls": settings.loaded_calls,
               "trial_timeout_s": settings.trial_timeout_s, "log_path": f"{work}/candidate.log",
               "world_size": settings.world_size,
               "gpu_lock": sandbox_gpu_lock_path(sandbox) if device == "cuda" else None,
               "timing": {"iters": settings.timing_iters, "iters_cpu": settings.timing_iters_cpu,
                          "warmup": settings.timing_warmup, "input_sets": settings.timing_input_sets,
                          "budget_ms": settings.timing_budget_ms, "iters_max": settings.timing_iters_max,
                          "calls_per_region": settings.timing_calls_per_region}}
        from orchestrator.sandbox.gpu_holds import measuring

        # A container cannot reach this host's GPU lock files: its whole judge holds them from here.
        holds = measuring(sandbox) if device == "cuda" and mode == "full" and not job["gpu_lock"] \
            else contextlib.nullcontext()
        with holds:
            result = sandbox.exec([sandbox.python, "-m", "orchestrator.runner.judge"],
                                  timeout_s=_judge_timeout(entry, settings, device), stdin=json.dumps(job).encode())
        counters = None
        if device == "cuda" and mode == "full" and settings.counters and not entry.collectives and '"failure_class": null' in result.stdout:
            counters = _counters(sandbox, job, settings)
    except SandboxError as exc:
        record["failure_class"], record["failure_detail"] = "infra_error", f"sandbox: {exc}"
        return record
    finally:
        if own and sandbox is not None:
            sandbox.close()
    from orchestrator.runner.judge import parse_verdict

    verdict = parse_verdict(result.stdout, nonce)
    if verdict is None:
        if result.timed_out:
            record["failure_class"] = "timeout"
            record["failure_detail"] = f"the evaluation did not finish within {result.wall_s:.0f} s" \
                + _last_stage(result.stderr)
        elif result.oom_killed:
            record["failure_class"], record["failure_detail"] = "runtime_error", "killed by the memory limit"
        else:
            record["failure_class"] = "runtime_error"
            record["failure_detail"] = (f"the judge ended without a verdict (exit code {result.returncode}): "
                                        f"{result.stderr[-1500:]}")
        return record
    record["failure_class"] = verdict.get("failure_class")
    record["failure_detail"] = verdict.get("failure_detail", "")
    record["device"] = verdict.get("device", record["device"])
    record["stages"].update(verdict.get("stages", {}))
    record["passed_disclosed"] = bool(verdict.get("passed_disclosed"))
    record["candidate_log"] = verdict.get("candidate_log", "")
    record["versions"].update({k: v for k, v in record["device"].items() if k in ("torch", "triton", "cuda")})
    if record["failure_class"] == "hack_detected":
        record["flags"] = sorted(set(record["flags"]) | {record["failure_detail"].split(":")[0]})
    timing = record["stages"].get("timing", {})
    record["speedup"] = timing.get("speedup") if record["failure_class"] is None else None
    if counters is not None:
        from orchestrator.scoring.counters import flags as counter_flags

        record["stages"]["counters"] = counters
        claimed_ms = timing.get("candidate", {}).get("median_ms")
        record["flags"] = sorted(set(record["flags"]) | set(counter_flags(counters, record["speedup"], claimed_ms)))
    return record


# ------------------------------------------------------------------------- the CLI


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="problem or translation task id (see `list`)")
    parser.add_argument("--solution", required=True, type=Path, help="the submission: a .py file defining ModelNew")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="where to run (default: cuda if present)")
    parser.add_argument("--stress", type=int, help="number of hidden stress shapes (default 8)")
    parser.add_argument("--seed", type=int, help="stress seed (default: secret, from os.urandom)")
    parser.add_argument("--loaded-trials", dest="loaded_trials", type=int,
                        help="GPU: correctness trials with a thread of the judge loading the GPU (default 2; 0: none)")
    parser.add_argument("--loaded-calls", dest="loaded_calls", type=int,
                        help="calls per loaded trial, back to back on one input set, each output checked (default 4)")
    parser.add_argument("--mode", choices=MODES, default="full", help="compile, check (disclosed shape only) or full")
    parser.add_argument("--sandbox", choices=["auto", "local", "docker"], help="sandbox backend (default auto)")
    parser.add_argument("--images-lock", type=Path, help="docker: use exactly the image digests in this lock file")
    parser.add_argument("--timing-iters", type=int, help="timed iterations on a GPU (default 50)")
    parser.add_argument("--world-size", type=int, help="collectives problems: ranks (default: the manifest's)")
    parser.add_argument("--judge-timeout-s", type=float, help="limit of the whole evaluation in seconds; a timeout "
                        "verdict names the last stage started (default: the manifest's total_s + 60)")
    parser.add_argument("--json", action="store_true", help="print the verdict record as JSON")
    parser.add_argument("--out", type=Path, help="also write the verdict record to this file")


def summary(record: dict[str, Any]) -> str:
    from tabulate import tabulate

    rows = []
    for name in ("static_analysis", "load", "correctness", "stress", "timing"):
        st = record["stages"].get(name)
        if not st:
            rows.append((name, "not run", ""))
            continue
        note = ""
        if name == "static_analysis":
            note = f"{len(st.get('findings', []))} findings"
        elif name in ("correctness", "stress"):
            trials = st.get("trials", [])
            note = f"{sum(t['passed'] for t in trials)}/{len(trials)} trials passed"
        elif name == "timing" and st.get("candidate"):
            note = (f"{st['unit']}: candidate {st['candidate']['median_ms']:.4g} ms, reference "
                    f"{st['reference']['median_ms']:.4g} ms, speedup {st['speedup']:.3g}x "
                    f"[{st['speedup_ci95'][0]:.3g}, {st['speedup_ci95'][1]:.3g}]")
        rows.append((name, st.get("status"), note))
    head = f"{record['problem']}: {record['status'].upper()}"
    if record["failure_class"]:
        head += f" ({record['failure_class']}): {record['failure_detail'][:600]}"
    return head + "\n" + tabulate(rows, headers=["stage", "status", "details"])


def main(args: argparse.Namespace) -> int:
    from orchestrator.config import Settings

    settings = Settings.from_args(args)
    if args.images_lock is not None and not args.images_lock.is_file():
        raise UserError(f"{args.images_lock}: no such lock file")
    record = evaluate(args.problem, args.solution, settings, mode=args.mode)
    text = json.dumps(record, indent=2, default=str)
    if args.out:
        args.out.write_text(text + "\n")
    print(text if args.json else summary(record))
    if record["failure_class"] == "infra_error":
        print(f"infrastructure error: {record['failure_detail']}", file=sys.stderr)
        return 3
    return 0 if record["status"] == "passed" else 1
