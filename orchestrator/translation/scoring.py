"""Scoring a translation candidate: the entry point the core pipeline dispatches to.

`evaluate(task_id, solution_path, settings, mode=..., sandbox=..., seed=...)` fetches
and verifies the task's pins, builds the A100 baseline (sm_90) and the H100 reference
(sm_90a) from the cache or fresh, builds the candidate (sm_90a), then runs the trusted
translation judge (`python -m orchestrator.translation.judge`) and returns a verdict
record valid against schemas/result.schema.json ($defs/verdict).

A candidate that does not compile is `compile_error` (the nvcc log is the detail);
a baseline or reference that does not build, or a judge that dies, is `infra_error`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.config import REPO_ROOT, Settings
from orchestrator.errors import UserError
from orchestrator.runner.judge import parse_verdict
from orchestrator.translation import builds, integrity, sources
from orchestrator.translation.catalog import Task, find_task

MODES = ("compile", "check", "full")


class SandboxUnavailableForTask(Exception):
    """docker was asked for, but the task's image is missing or not in the lock."""


# The judge and three library processes each hold inputs of up to a few GB (H200-sized shapes).
TRANSLATION_MEMORY_GB = 48.0


def _verdict(task: Task, solution: Path, started: float, **fields: Any) -> dict[str, Any]:
    digest = hashlib.sha256(solution.read_bytes()).hexdigest() if solution.is_file() else ""
    record: dict[str, Any] = {
        "schema_version": 1, "kind": "verdict", "problem": task.id, "track": task.track,
        "status": "failed", "failure_class": None, "stages": {}, "speedup": None,
        "device": {"type": "cuda"}, "sandbox": {"backend": "none"},
        "solution": {"path": str(solution), "sha256": digest},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
    }
    record.update(fields)
    record["wall_s"] = time.time() - started
    return record


def prepare_libraries(task: Task, settings: Settings, candidate: Path | None, offline: bool = False,
                      search_dirs: list[Path] | None = None) -> dict[str, builds.BuildResult]:
    """Pins, then the a100 and h100 builds (raise on failure), then the candidate (data)."""
    roots = sources.prepare(task.manifest, settings.cache_dir, search_dirs or [], offline=offline)
    out = {side: builds.build(task, side, roots, settings.cache_dir) for side in ("a100", "h100")}
    if candidate is not None:
        out["candidate"] = builds.build(task, "candidate", roots, settings.cache_dir, candidate=candidate)
    return out


def evaluate(task_id: str, solution_path: str | Path, settings: Settings, *, mode: str = "full",
             sandbox: Any = None, seed: int | None = None, isolate: bool = True,
             allow_reference: bool = False) -> dict[str, Any]:
    """Score one candidate .cu file for translation task `task_id` (see docs/translation.md).

    The judge runs in `sandbox`, or in a fresh one of `settings.sandbox` (local or docker);
    `isolate=False` runs it as a plain subprocess (recorded as such in the verdict).
    `allow_reference=True` (verification only: the H100 reference scored as a candidate)
    skips the check that the candidate neither includes nor pastes the H100 reference.
    """
    if mode not in MODES:
        raise UserError(f"mode must be one of {MODES}, not {mode!r}")
    started = time.time()
    solution = Path(solution_path)
    task = find_task(task_id, settings.translation_dir)
    if not solution.is_file():
        raise UserError(f"{solution}: no such file")
    if task.manifest["glue"] != "complete":
        raise UserError(f"{task.id}: this task's glue is not written yet (manifest glue: 'pending')")
    world_size = _world_size(task, settings) if task.is_multi else 1
    try:
        libs = prepare_libraries(task, settings, solution)
    except (builds.BuildError, sources.PinError) as exc:
        return _verdict(task, solution, started, failure_class="infra_error", failure_detail=str(exc))
    cand = libs["candidate"]
    # A cached build cost this evaluation nothing: its recorded compile time (from when it was
    # built) made a 3 s load read 61 s in the verdicts of the H200 runs.
    build_stage = {"status": "passed" if cand.ok else "failed", "wall_s": 0.0 if cand.cached else cand.wall_s,
                   "build_cached": bool(cand.cached), "message": "" if cand.ok else cand.log[-4000:]}
    if not cand.ok:
        return _verdict(task, solution, started, failure_class="compile_error", failure_detail=cand.log[-4000:],
                        stages={"load": build_stage})
    if not allow_reference:
        roots = sources.prepare(task.manifest, settings.cache_dir, [])  # unpacked already by the builds
        leak = integrity.reference_leak(task, roots, solution)
        if leak:
            return _verdict(task, solution, started, failure_class="hack_detected", failure_detail=leak,
                            stages={"load": build_stage})
    if _device(settings) == "cpu":
        # No GPU: the candidate compiled and linked for sm_90a, which is all a CPU can check.
        if mode == "compile":
            return _verdict(task, solution, started, status="passed", device={"type": "cpu"},
                            stages={"load": build_stage})
        return _verdict(task, solution, started, failure_class="infra_error", device={"type": "cpu"},
                        failure_detail="translation tasks run on a CUDA GPU; on a CPU only --mode compile works",
                        stages={"load": build_stage})
    job = {
        "symbol": task.manifest["entry"]["symbol"], "device": _device(settings), "mode": mode,
        "seed": seed if seed is not None else (settings.seed if settings.seed is not None else secrets.randbits(62)),
        "trials": settings.trials, "stress": settings.stress,
        "timing": {"iters": settings.timing_iters, "warmup": settings.timing_warmup,
                   "input_sets": settings.timing_input_sets, "budget_ms": settings.timing_budget_ms,
                   "iters_max": settings.timing_iters_max, "calls_per_region": settings.timing_calls_per_region,
                   "processes": settings.timing_processes},
        "trial_timeout_s": settings.trial_timeout_s,
    }
    job["loaded_trials"] = settings.loaded_trials if job["device"].startswith("cuda") else 0
    job["loaded_calls"] = settings.loaded_calls
    timeout = float(task.manifest["time_limits"]["total_s"])
    module = "orchestrator.translation.judge"
    extra: dict[str, Path] = {}
    if task.is_multi:
        module = "orchestrator.translation.multijudge"
        try:
            extra["ipc"] = builds.build_ipc_helper(settings.cache_dir)
        except builds.BuildError as exc:
            return _verdict(task, solution, started, failure_class="infra_error", failure_detail=str(exc))
        first = int(job["device"].split(":")[1])
        job.update(world_size=world_size, gpus=list(range(first, first + world_size)) if not settings.gpus else
                   [int(g) for g in settings.gpus.split(",")][:world_size])
    if not isolate:
        job.update(task_dir=str(task.path), libraries={side: str(r.library) for side, r in libs.items()})
        if task.is_multi:
            job.update(devices=[f"cuda:{g}" for g in job["gpus"]], ipc_helper=str(extra["ipc"]))
        if not job["device"].startswith("cpu"):
            gpus = job.get("gpus") or [int(job["device"].split(":")[1])]
            job["gpu_lock"] = ",".join(f"/tmp/popcorn-gpu{g}.lock" for g in gpus)
        result = run_judge(job, timeout, None, module)
    else:
        result = _judge_in_sandbox(task, libs, job, settings, timeout, sandbox, module, extra)
    backend = result.pop("sandbox_backend", "none (isolate=False)")
    return _assemble(task, solution, started, result, build_stage, {s: r.to_dict() for s, r in libs.items()},
                     backend)


def _judge_in_sandbox(task: Task, libs: dict[str, builds.BuildResult], job: dict[str, Any], settings: Settings,
                      timeout: float, sandbox: Any, module: str = "orchestrator.translation.judge",
                      extra: dict[str, Path] | None = None) -> dict[str, Any]:
    """Copy the task's glue and the libraries into a sandbox and run the judge there."""
    from orchestrator.sandbox.base import SandboxError, SandboxSpec, create

    own = sandbox is None
    cpu = job["device"] == "cpu"
    gpus = tuple(job.get("gpus") or ([] if cpu else [int(job["device"].split(":")[1])]))
    try:
        if own:
            env = {"POPCORN_DEVICE": job["device"], **task.manifest.get("nccl_env", {})}
            spec = SandboxSpec(run_id="adhoc", episode=task.id, gpus=gpus,
                               memory_bytes=int(max(settings.sandbox_memory_gb, TRANSLATION_MEMORY_GB) * 2**30),
                               pids=settings.sandbox_pids, env=env, shm_bytes=8 << 30)
            backend, image = _backend(task, settings)
            sandbox = create(backend, dataclasses.replace(spec, image=image))
        files = {f"task/{p.name}": p.read_bytes() for p in task.path.iterdir() if p.is_file()}
        files.update({f"lib/{side}.so": Path(r.library).read_bytes() for side, r in libs.items() if r.library})
        files.update({f"lib/{name}.so": Path(path).read_bytes() for name, path in (extra or {}).items()})
        if task.is_multi and cpu:
            files["lib/ipc.so"] = b""  # CPU ranks share POSIX memory; the CUDA IPC helper is not loaded
        sandbox.put_files(files)
        work = sandbox.workdir
        # The sandbox renumbers its GPUs from 0 (CUDA_VISIBLE_DEVICES / device requests).
        inside = {**job, "task_dir": f"{work}/task", "log_dir": f"{work}/logs",
                  "libraries": {side: f"{work}/lib/{side}.so" for side in libs},
                  "device": "cpu" if cpu else "cuda:0"}
        if task.is_multi:
            inside.update(devices=["cpu"] * int(job["world_size"]) if cpu else [f"cuda:{i}" for i in range(len(gpus))],
                          ipc_helper=f"{work}/lib/ipc.so")
        from orchestrator.scoring.pipeline import sandbox_gpu_lock_path

        inside["gpu_lock"] = None if cpu else sandbox_gpu_lock_path(sandbox)  # timings never overlap other work on a GPU
        result = run_judge(inside, timeout, sandbox, module)
        result["sandbox_backend"] = sandbox.name
        return result
    except (SandboxError, SandboxUnavailableForTask) as exc:
        return {"failure_class": "infra_error", "failure_detail": f"sandbox: {exc}", "stages": {}}
    finally:
        if own and sandbox is not None:
            sandbox.close()


def _backend(task: Task, settings: Settings) -> tuple[str, str | None]:
    """(backend, image). `auto` takes docker only when an engine answers and the task's image
    (`images build --translation`) is there, as the core does for problems; else local."""
    if settings.sandbox == "local":
        return "local", None
    from orchestrator.sandbox.docker import engine_available

    if settings.sandbox == "auto" and not engine_available():
        return "local", None
    from orchestrator.images import resolve_image

    image_id = f"translation/{task.path.parent.name}/{task.id}"
    try:
        image, _digest = resolve_image(image_id, settings.images_lock, settings)
    except UserError as exc:
        if settings.sandbox == "docker" or settings.images_lock is not None:
            raise SandboxUnavailableForTask(str(exc)) from exc
        return "local", None
    return "docker", image


def _world_size(task: Task, settings: Settings) -> int:
    """Ranks of a multi-GPU run: one per GPU in settings.gpus, else the manifest's default."""
    ws = task.manifest["world_size"]
    n = len([g for g in settings.gpus.split(",") if g.strip()]) if settings.gpus else int(ws["default"])
    if not 2 <= n <= int(ws["max"]):
        raise UserError(f"{task.id}: world size {n} outside [2, {ws['max']}] (set --gpus to 2 or more GPU indices)")
    return n


def _device(settings: Settings) -> str:
    if settings.resolved_device() == "cpu":
        return "cpu"
    gpus = (settings.gpus or "0").split(",")
    return f"cuda:{gpus[0].strip()}"


def run_judge(job: dict[str, Any], timeout_s: float, sandbox: Any = None,
              module: str = "orchestrator.translation.judge") -> dict[str, Any]:
    """Run the judge `module` (in `sandbox` if given, else a local subprocess) and return its signed verdict."""
    nonce = secrets.token_hex(32)
    payload = json.dumps({**job, "nonce": nonce}).encode()
    cmd = [sys.executable, "-m", module]
    if sandbox is not None:
        res = sandbox.exec([sandbox.python, "-m", module], timeout_s=timeout_s, stdin=payload)
        stdout, stderr, timed_out = res.stdout, res.stderr, res.timed_out
    else:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        try:
            proc = subprocess.run(cmd, input=payload, capture_output=True, timeout=timeout_s, env=env, check=False)
            stdout, stderr, timed_out = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"), False
        except subprocess.TimeoutExpired as exc:
            stdout = (exc.stdout or b"").decode(errors="replace")
            stderr, timed_out = (exc.stderr or b"").decode(errors="replace"), True
    verdict = parse_verdict(stdout, nonce)
    if verdict is None:
        kind = "timeout" if timed_out else "infra_error"
        return {"failure_class": kind, "failure_detail": f"no signed verdict from the judge; stderr ends with:\n"
                                                         f"{stderr[-3000:]}", "stages": {}}
    return verdict


def _assemble(task: Task, solution: Path, started: float, result: dict[str, Any], build_stage: dict[str, Any],
              builds_info: dict[str, Any], backend: str) -> dict[str, Any]:
    stages = dict(result.get("stages", {}))
    load = stages.get("load", {"status": "failed"})
    stages["load"] = {**load, "wall_s": float(load.get("wall_s", 0.0)) + build_stage["wall_s"]}
    failure = result.get("failure_class")
    timing_stage = stages.get("timing", {})
    speedup = timing_stage.get("speedup") if failure is None else None
    device = result.get("device", {"type": "cuda"})
    stress = stages.get("stress", {})
    fields: dict[str, Any] = {
        "status": "passed" if failure is None else "failed",
        "failure_class": failure, "stages": stages, "speedup": speedup,
        "device": {"type": device.get("type", "cuda"), **({"name": device["name"]} if "name" in device else {})},
        "passed_disclosed": bool(result.get("passed_disclosed")),
        "reward_hack_suspected": bool(result.get("passed_disclosed")) and stress.get("status") == "failed",
        "versions": {"builds": builds_info, "torch": device.get("torch"), "cuda": device.get("cuda")},
        "sandbox": {"backend": backend},
        "flags": [],
    }
    if failure:
        fields["failure_detail"] = result.get("failure_detail", "")
    return _verdict(task, solution, started, **fields)
