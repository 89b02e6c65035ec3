"""The trusted judge: `python -m orchestrator.runner.judge` inside a sandbox.

Reads one JSON job on stdin (problem folder, submission path, device, mode, secret
stress seed, a nonce), runs the candidate in its own process (candidate.py), computes
reference outputs itself, and prints one line `POPCORN-VERDICT <json> <hmac>` whose
HMAC is keyed by the nonce: the candidate never sees the nonce (it lives only in the
judge's memory, which is made non-dumpable), so it cannot forge a verdict even if it
manages to write to the judge's stdout.

Stages: load -> correctness at the disclosed shape (fresh inputs every trial, one
trial reusing the previous buffers in place, one repeating the previous content in
new buffers) -> stress on hidden shapes -> timing of candidate and reference.
"""
from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import fcntl
import hashlib
import hmac
import json
import multiprocessing as mp
import os
import pickle
import random
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch

from orchestrator.runner import timing, wire
from orchestrator.runner.gpuload import GpuLoad
from orchestrator.runner.problem import LoadedProblem, load_problem, to_device, tree_digest
from orchestrator.runner.shapes import Shape, default_shape, shape_key, stress_shapes

VERDICT_PREFIX = "POPCORN-VERDICT "
HACK_FLAGS = ("timer_tampered", "thread_alive_after_return", "output_changed_after_return",
              "output_aliases_input", "output_reused_across_calls", "input_mutation",
              "timer_disagreement", "timed_output_mismatch", "judge_tampered")


class StageFailure(Exception):
    def __init__(self, failure_class: str, detail: str):
        super().__init__(detail)
        self.failure_class, self.detail = failure_class, detail


def forged_message(exc: Exception, who: str, untrusted: bool = True) -> StageFailure:
    """A reply that wire.loads refused. The sending side refuses the same things, so the
    message was written by code in that process (a submission's); from one of our own
    reference libraries it is a broken run."""
    return StageFailure("hack_detected" if untrusted else "infra_error", f"forged_message: {who} sent {exc}")


def _make_undumpable() -> None:
    """Other processes of the same user cannot read our memory or /proc/<pid>/fd."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


class ProcessHandle:
    """A spawned worker process (`proc`), its pipe (`conn`) and its log (`log_path`)."""

    proc: Any
    conn: Any
    log_path: str

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - n))
                text = f.read().decode(errors="replace").strip()
        except OSError:
            return ""
        return f"; its output ends with:\n{text}" if text else ""

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=10)

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                wire.send(self.conn, {"op": "exit"})
                self.proc.join(timeout=10)
        except OSError:
            pass
        self.kill()


class Candidate(ProcessHandle):
    """The candidate's process and its pipe; every call has a deadline."""

    def __init__(self, solution: str, device: str, log_path: str):
        self.log_path = log_path
        self.solution = solution
        self.device = device
        self._spawn()

    def _spawn(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        from orchestrator.runner import candidate

        self.proc = ctx.Process(target=candidate.serve, args=(child_conn, self.device, self.log_path), daemon=True)
        self.proc.start()
        child_conn.close()

    def restart(self) -> None:
        """A fresh process in place of this one (stopped already), its submission not yet loaded."""
        self.kill()
        self.conn.close()
        self._spawn()

    def died(self) -> StageFailure:
        self.proc.join(timeout=5)
        return StageFailure("runtime_error", f"the candidate process died (exit code {self.proc.exitcode})"
                                             f"{self.log_tail()}")

    def call(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        try:
            wire.send(self.conn, msg)
        except OSError:  # gone already: it crashed, or we killed it after a forged reply
            raise self.died() from None
        if not self.conn.poll(timeout_s):
            self.kill()
            raise StageFailure("timeout", f"{msg['op']} did not finish within {timeout_s:.0f} s")
        try:
            reply = wire.recv(self.conn)
        except pickle.UnpicklingError as exc:
            self.kill()
            raise forged_message(exc, "the candidate's process")
        except (EOFError, OSError):
            raise self.died()
        if not reply.get("ok"):
            raise StageFailure(reply.get("kind", "runtime_error"), reply.get("error", "unknown error"))
        hacks = [f for f in reply.get("flags", []) if f.split(":")[0] in HACK_FLAGS]
        if hacks:
            raise StageFailure("hack_detected", ", ".join(hacks))
        return reply


SHARED_TRIAL_LIMIT_FACTOR = 2  # see Judge._trial_limit
LOADED_TRIALS = 2  # correctness trials on a GPU with gpuload.py's load on
# Calls per loaded trial, back to back on one input set, each output checked. A race is a chance
# per call: example 88's fa2-bwd race failed 34 % of back-to-back calls on a quiet H100, 46 % beside
# gpuload's thread, yet one call per trial let the racy build pass all six of a judge's trials
# once in three (twentieth session).
LOADED_CALLS = 4
LOADED_NOTE = " (with the GPU loaded by other work: a result that changes with the GPU's company is a race)"


def plain_trial_count(job: dict[str, Any]) -> int:
    """Correctness trials without the load: the job's fresh ones (at least 3) and a repeat of the third."""
    return max(int(job.get("trials", 3)), 3) + 1


def loaded_trial_count(job: dict[str, Any], device: str) -> int:
    """Correctness trials with the GPU load on (gpuload.py): the job's, by default 2 on a GPU and none on a CPU."""
    return int(job.get("loaded_trials", 0 if device == "cpu" else LOADED_TRIALS))


def calls_per_trial(job: dict[str, Any], kind: str) -> int:
    """Calls in a trial of this kind: a loaded trial makes the job's `loaded_calls` (LOADED_CALLS), others one."""
    return max(int(job.get("loaded_calls", LOADED_CALLS)), 1) if kind == "loaded" else 1


def loaded_fields(load: dict[str, Any], calls: int) -> dict[str, Any]:
    """What a trial's record says of its load and calls: `load_iterations` if the load ran, `calls` if several."""
    return {**load, **({"calls": calls} if calls > 1 else {})}


def first_wrong(per_call: list[Any], passed: Callable[[Any], bool] = lambda result: result.passed) -> tuple[Any, str]:
    """A trial's first failing call's comparison (else the last call's) and, for a trial of several
    calls, which call it was, for the failure's message. A multi-rank judge passes each call's
    list of rank results and a `passed` that wants them all."""
    n = len(per_call)
    at = next((i for i, results in enumerate(per_call) if not passed(results)), n - 1)
    return per_call[at], (f"call {at + 1} of {n}: " if n > 1 else "")

PROGRESS_PREFIX = "[popcorn "  # scoring.pipeline finds the last of these lines in a timed-out judge


def progress(what: str) -> None:
    """One timestamped line on the judge's stderr per stage start, so a timeout says where it
    was (stdout carries only the verdict)."""
    sys.stderr.write(f"{PROGRESS_PREFIX}{dt.datetime.now():%H:%M:%S}] {what}\n")
    sys.stderr.flush()


def timed_stages(stages: dict[str, dict[str, Any]], mode: str, cand: Any, correctness: Callable[[Any], None],
                 stress: Callable[[Any], None], timing: Callable[[Any], None],
                 lock_wait: Callable[[], float] | None = None) -> None:
    """Correctness, then (unless only checking) stress and timing, in order; each stage record
    gets its whole wall time (`stage_wall_s`: inputs, reference, candidate calls, checks), also
    when it fails, so a slow evaluation says where it went, and, given `lock_wait()` (the judge's
    seconds spent waiting for the GPU lock so far), the part of it spent waiting (`lock_wait_s`).
    Shared by the core, collectives and translation judges."""
    steps = [("correctness", correctness)] + ([] if mode == "check" else [("stress", stress), ("timing", timing)])
    for name, step in steps:
        progress(f"stage {name}")
        t0, w0 = time.perf_counter(), lock_wait() if lock_wait else 0.0
        try:
            step(cand)
        finally:
            if name in stages:
                stages[name]["stage_wall_s"] = round(time.perf_counter() - t0, 3)
                if lock_wait:
                    stages[name]["lock_wait_s"] = round(lock_wait() - w0, 3)


def stress_trials(stages: dict[str, dict[str, Any]], seed: int | None, shapes: list[Shape],
                  trial: Callable[[Shape, list[dict]], None]) -> None:
    """The stress stage of every judge: each hidden shape is tried (`trial(shape, record)` appends
    to the record and raises StageFailure), all of them even after a stress failure, so the
    record says how many failed; the first stress failure is raised at the end, anything else at once."""
    trials: list[dict] = []
    stages["stress"] = {"status": "failed", "seed": seed, "n": len(shapes), "trials": trials}
    failed: StageFailure | None = None
    for shape in shapes:
        try:
            trial(shape, trials)
        except StageFailure as exc:
            if exc.failure_class != "stress_failed":
                raise
            failed = failed or exc
    if failed:
        raise failed
    stages["stress"]["status"] = "passed"

@dataclass
class Judge:
    job: dict[str, Any]
    problem: LoadedProblem = field(init=False)
    stages: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.problem = load_problem(self.job["problem_dir"])
        self.device = self.job["device"]
        self.mode = self.job.get("mode", "full")
        seed = self.job.get("seed")
        self.seed = int(seed) if seed is not None else int.from_bytes(os.urandom(8), "little") >> 2
        self.rng = random.Random(self.seed)
        self.loaded_rng = random.Random(f"loaded-{self.seed}")  # apart, so a seed gives the same stress shapes either way
        limits = self.problem.manifest.get("time_limits", {})
        self.trial_timeout = float(self.job.get("trial_timeout_s") or limits.get("trial_s", 120))
        self.disclosed = default_shape(self.problem.manifest["shapes"], "cpu" if self.device == "cpu" else "cuda")
        self.ref_models: dict[str, torch.nn.Module] = {}
        self.lock_wait_s = 0.0  # time spent waiting for the host's GPU lock (other evaluations' trials or timings)
        self.load = GpuLoad(self.device)  # allocates at the first loaded trial

    # -- reference side (trusted, this process) ---------------------------------------
    def reference(self, shape: Shape, inputs: tuple[Any, ...]) -> Any:
        key = shape_key(shape)
        if key not in self.ref_models:
            self.ref_models = {key: self.problem.model(shape, self.device)}
        with torch.no_grad():
            return self.ref_models[key](*to_device(inputs, self.device))

    def _seed(self) -> int:
        return self.rng.getrandbits(62)

    # -- stages -----------------------------------------------------------------------
    def run(self, cand: Candidate) -> None:
        t0 = time.perf_counter()
        progress("load")
        with self.gpu_shared():
            self._load(cand)
            self._build(cand, self.disclosed)
        self.stages["load"] = {"status": "passed", "wall_s": time.perf_counter() - t0,
                               "lock_wait_s": round(self.lock_wait_s, 3)}
        if self.mode == "compile":
            inputs = self.problem.inputs(self.disclosed, self._seed(), "cpu")
            with self.gpu_shared():
                cand.call({"op": "forward", "key": shape_key(self.disclosed), "inputs": inputs}, self.trial_timeout)
            return
        self.checked_stages(cand)

    def _trial_limit(self) -> float:
        """A trial call's time limit: the manifest's, doubled while other evaluations' trials may
        share the GPU and slow this one (a limit catches a call that never returns; it must not
        fail a correct submission for the company it kept)."""
        return self.trial_timeout * (SHARED_TRIAL_LIMIT_FACTOR if self._shares_gpu() else 1)

    def _fresh_timed_process(self) -> bool:
        """Whether the timing gets a fresh candidate process: so that what a submission works out
        at its first call (an autotuner's pick) comes from the timing's warm-up with the GPU
        alone, not from correctness beside other evaluations' trials (csr_spmm's oracle: 0.88x,
        then 1.15x; docs/executors.md). A judge alone on its GPU had no company: it keeps its process."""
        return self._shares_gpu()

    def _shares_gpu(self) -> bool:
        """Whether other evaluations' trials may run beside ours (the pipeline gives a lock only on a GPU)."""
        return bool(self.job.get("gpu_lock"))

    def _released_after(self, cand: Candidate, trial: Callable[[], Any]) -> Any:
        """`trial()`, then the cached GPU memory of the judge and the candidate back to the
        driver, while other evaluations' trials may share the GPU (a trial's tensors are dead
        by then; the next trial allocates its own)."""
        try:
            return trial()
        finally:
            if self._shares_gpu():
                torch.cuda.empty_cache()
                try:
                    cand.call({"op": "release"}, self.trial_timeout)
                except StageFailure:
                    pass  # a candidate that died says so at its next call

    def gpu_shared(self) -> contextlib.AbstractContextManager[None]:
        """The host's GPU lock, shared: for this judge's kernels that do not measure (loading,
        building, trials). Other evaluations' trials may overlap them; no timing does."""
        return self._gpu_lock(shared=True)

    def gpu_alone(self) -> contextlib.AbstractContextManager[None]:
        """The host's GPU lock, exclusive: timing, and a trial run again alone."""
        return self._gpu_lock(shared=False)

    @contextlib.contextmanager
    def _gpu_lock(self, shared: bool) -> Iterator[None]:
        t0 = time.perf_counter()
        with gpu_lock(self.job.get("gpu_lock"), shared=shared, waited=self.lock_waited):
            self.lock_wait_s += time.perf_counter() - t0
            yield

    def checked_stages(self, cand: Any) -> None:
        """This judge's stages through timed_stages (the collectives judge calls it too)."""
        timed_stages(self.stages, self.mode, cand, self.correctness, self.stress, self.timing,
                     lock_wait=lambda: self.lock_wait_s)

    def _build(self, cand: Candidate, shape: Shape) -> None:
        cand.call({"op": "build", "key": shape_key(shape), "init": self.problem.init_inputs(shape)},
                  self.trial_timeout)

    def _trial(self, cand: Candidate, shape: Shape, seed: int, kind: str, record: list[dict] | None,
               reuse_buffers: bool = False, failure: str = "incorrect") -> None:
        key, calls = os.urandom(16), calls_per_trial(self.job, kind)
        load: dict[str, Any] = {}

        def attempt(alone: bool, restarted: list[str]) -> tuple[Any, float]:
            # inputs made under the hold too: a timing elsewhere then has the host's CPUs quiet
            inputs = self.problem.inputs(shape, seed, "cpu")
            ref = self._reference_beside(cand, shape, inputs, alone, restarted)
            t0 = time.perf_counter()
            with self.load.running(kind == "loaded") as info:  # the calls back to back, checked after
                replies = [cand.call({"op": "forward", "key": shape_key(shape), "inputs": inputs,
                                      "digest_key": key, "reuse_buffers": reuse_buffers}, self._trial_limit())
                           for _ in range(calls)]
            wall = time.perf_counter() - t0
            load.update(info)
            digest = tree_digest(inputs, key)
            if any(reply["inputs_digest"] != digest for reply in replies):
                raise StageFailure("hack_detected", "input_mutation: the submission modified its input tensors")
            on_device = to_device(inputs, self.device)
            return first_wrong([self.problem.compare(on_device, reply["output"], ref) for reply in replies]), wall

        shared, retried, restarted = self._shares_gpu(), False, []
        try:
            with self.gpu_shared():
                (result, which), wall = self._released_after(cand, lambda: attempt(not shared, restarted))
        except (torch.OutOfMemoryError, StageFailure) as exc:
            if not (shared and _out_of_memory(exc)):
                raise
            # Other evaluations' trials share this GPU and may have held the memory that ran
            # out: the same trial once more with the GPU to itself (every judge releases its
            # cache after each trial).
            retried = True
            with self.gpu_alone():
                (result, which), wall = self._released_after(cand, lambda: attempt(True, restarted))
        entry = {"kind": kind, "shape": shape, "passed": result.passed, "message": which + result.message, "wall_s": wall,
                 **{k: v for k, v in result.to_dict().items() if k in ("max_abs_err", "rel_norm_err", "mismatch_fraction")}}
        if retried:
            entry["retried_alone"] = "out of GPU memory beside other evaluations' trials"
        if restarted:
            entry["candidate_restarted"] = restarted[0]
        entry.update(loaded_fields(load, calls))
        if record is not None:
            record.append(entry)
        if not result.passed:
            raise StageFailure(failure, f"{kind} trial at shape {shape}{LOADED_NOTE if load else ''}: "
                                        f"{which}{result.message}")

    def close(self) -> None:
        self.load.close()

    def _reference_beside(self, cand: Candidate, shape: Shape, inputs: tuple[Any, ...], alone: bool,
                          restarted: list[str]) -> Any:
        """The reference's output for a trial. Out of GPU memory with the GPU alone, the memory
        may be the candidate's: its process is stopped, the reference computed, and a fresh
        candidate loaded and built for the shape (the reference failing again is its own need:
        infra_error). A submission is not excused by an infrastructure error it caused: one whose
        process held more than half the GPU fails (an honest one holds little between calls;
        the reference may need 45 %, `validate --device cuda`)."""
        try:
            return self.reference(shape, inputs)
        except torch.OutOfMemoryError:
            if not alone:
                raise
        self.ref_models.clear()
        ref, note = reference_without_candidate(lambda: self.reference(shape, inputs), cand.kill, self.device)
        restarted.append(note)
        self._restart_unheld(cand)  # a rare path, taken with the GPU alone: it keeps that hold
        self._load(cand)
        self._build(cand, shape)
        return ref

    def correctness(self, cand: Candidate) -> None:
        trials: list[dict] = []
        self.stages["correctness"] = {"status": "failed", "shape": self.disclosed, "trials": trials}
        seeds = [self._seed() for _ in range(plain_trial_count(self.job) - 1)]  # the repeat reuses one
        plan = [("fresh", seeds[0], False), ("in_place", seeds[1], True), ("fresh", seeds[2], False),
                ("repeat", seeds[2], False)] + [("fresh", s, False) for s in seeds[3:]]
        loaded = loaded_trial_count(self.job, self.device)
        plan += [("loaded", self.loaded_rng.getrandbits(62), False) for _ in range(loaded)]
        for kind, seed, reuse in plan:
            self._trial(cand, self.disclosed, seed, kind, trials, reuse_buffers=reuse)
        self.load.close()  # its buffers are not needed past correctness
        self.stages["correctness"]["status"] = "passed"

    def stress(self, cand: Candidate) -> None:
        n = int(self.job.get("stress", 8))
        shapes = stress_shapes(self.problem.manifest["shapes"], self.problem.manifest.get("constraints", []),
                               n, self._seed(), self.device)

        def trial(shape: Shape, record: list[dict]) -> None:
            with self.gpu_shared():
                self._build(cand, shape)
            self._trial(cand, shape, self._seed(), "stress", record, failure="stress_failed")

        stress_trials(self.stages, self.seed, shapes, trial)

    def timing(self, cand: Candidate) -> None:
        # Timing holds the GPU alone: other evaluations on it wait here (their correctness and
        # stress phases may overlap; timings never do). What it needs but does not measure is
        # made first, under the shared hold like a trial: the fifteenth session's Popcorn2 pass
        # held the GPU alone 277 s for timings, while the 4 input sets of its 34 problems take
        # about 80 s to make (on the CI machine's CPU), seconds in which the other judges waited.
        progress("timing set-up, beside other evaluations' trials")
        t0, w0 = time.perf_counter(), self.lock_wait_s
        fresh = self._fresh_timed_process()
        if fresh:
            self._restart_unheld(cand)
        setup = None
        with self.gpu_shared():
            try:
                setup = self._loaded_setup(cand, fresh)
            except (torch.OutOfMemoryError, StageFailure) as exc:
                if not (self._shares_gpu() and _out_of_memory(exc)):
                    raise
        if setup is None:  # out of memory beside other evaluations' trials: once more, the GPU alone
            if fresh:  # the failed set-up's process may hold memory and has been built
                self._restart_unheld(cand)
            with self.gpu_alone():
                setup = self._reference_fits(cand, lambda: self._loaded_setup(cand, fresh))
        setup_s = time.perf_counter() - t0 - (self.lock_wait_s - w0)
        progress("timing, the GPU alone")
        try:
            with self.gpu_alone():
                self._reference_fits(cand, lambda: self._timing(cand, setup))
        finally:
            if "timing" in self.stages:  # stage wall less lock waits less this: the time held alone
                self.stages["timing"]["setup_s"] = round(setup_s, 3)

    def _reference_fits(self, cand: Candidate, work: Callable[[], Any]) -> Any:
        """`work()` with the GPU alone. The reference out of memory there, with only this candidate
        beside it, is the submission's failure if its process held more than half the GPU (as in
        a trial, Judge._reference_beside), else the reference's own need: the judge's error."""
        try:
            return work()
        except torch.OutOfMemoryError:
            refuse_a_candidate_holding_the_gpu(cand.kill, self.device)
            raise

    def lock_waited(self, seconds: float) -> None:
        """A wait over two seconds for the GPU lock (the collectives judge logs it as a progress line)."""

    def _loaded_setup(self, cand: Candidate, fresh: bool) -> dict[str, Any]:
        """_timing_setup, the submission loaded first into a `fresh` process (loading may
        initialise the GPU: it runs under the caller's hold). `fresh` goes with the set-up:
        such a process makes its first timed call untimed."""
        if fresh:
            self._load(cand)
        return {**self._timing_setup(cand), "fresh": fresh}

    def _timing_setup(self, cand: Candidate) -> dict[str, Any]:
        """What the timing needs and does not measure: the candidate built at the disclosed
        shape, the input sets (the reference's copy on the device) and the reference's
        fingerprint of each set."""
        shape = self.disclosed
        self._build(cand, shape)
        n_sets = int(self.job.get("timing", {}).get("input_sets", 4))
        sets = [self.problem.inputs(shape, self._seed(), "cpu") for _ in range(n_sets)]
        ref_prints = [timing.fingerprint(self.reference(shape, s)) for s in sets]
        # The candidate gets its copy with the first timed request, as before: shipped earlier,
        # the sets would sit in its process, where a thread of the submission could precompute
        # their outputs before any clock starts.
        return {"sets": sets, "ref_prints": ref_prints, "dev_sets": [to_device(s, self.device) for s in sets],
                "ref_model": self.ref_models.get(shape_key(shape)) or self.problem.model(shape, self.device)}

    def _restart_unheld(self, cand: Candidate) -> None:
        """A new candidate process in place of this one, up and answering, its submission not yet
        loaded. Callers start it outside any GPU hold where they can: it launches nothing."""
        cand.restart()
        cand.call({"op": "ready"}, self.trial_timeout)

    def _load(self, cand: Candidate) -> None:
        cand.call({"op": "load", "solution": self.job["solution"]}, self.trial_timeout)

    def _timing(self, cand: Candidate, setup: dict[str, Any]) -> None:
        shape = self.disclosed
        t = self.job.get("timing", {})
        cpu = self.device == "cpu"
        iters = int(t.get("iters_cpu" if cpu else "iters", 5 if cpu else 50))
        # a fresh process (Judge.timing) makes its first call untimed, whatever the job says
        warmup = max(int(t.get("warmup", 3)), 1 if setup["fresh"] else 0)
        hold = int(t.get("hold_bytes", (2 << 30) if cpu else _gpu_hold_bytes()))
        ref_prints, ref_model, dev_sets = setup["ref_prints"], setup["ref_model"], setup["dev_sets"]
        self.stages["timing"] = {"status": "failed", "unit": "cpu_wall" if cpu else "cuda_events", "l2_flush": not cpu}
        cand_sets = timing.ships_once(setup["sets"])

        most = int(t.get("calls_per_region", timing.MAX_CALLS_PER_REGION))
        regions = timing.RegionSizes(["candidate", "reference"])

        def time_candidate(n: int, w: int) -> dict[str, Any]:
            reply = cand.call({"op": "time", "key": shape_key(shape), **cand_sets(), "iters": n, "warmup": w,
                               "hold_bytes": hold, "max_calls_per_region": most,
                               "calls_per_region": regions.request("candidate")}, self.trial_timeout * 4 + n * 10)
            regions.note("candidate", reply["timing"]["calls_per_region"], _median(reply["timing"]["times_ms"]))
            return reply

        def time_reference(n: int, w: int) -> dict[str, Any]:
            with torch.no_grad():
                result = timing.time_calls(ref_model, dev_sets, self.device, n, w, hold, max_calls_per_region=most,
                                           calls=regions.request("reference"))
            regions.note("reference", result["calls_per_region"], _median(result["times_ms"]))
            return result

        # candidate and reference alternate in rounds on a GPU, so clock drift hits both alike
        rounds = timing.interleaved({"candidate": time_candidate, "reference": time_reference}, iters, warmup,
                                    rounds=1 if cpu else 5,
                                    **timing.budget(t, cpu, lambda name, reply: timing.region_times(
                                        reply["timing"] if name == "candidate" else reply)))
        prints = [p for reply in rounds["candidate"] for p in reply["fingerprints"]]
        rel = timing.fingerprint_rel(self.problem.manifest["tolerance"], hasattr(self.problem.module, "check_output"))
        bad = [k for k, fp in prints if not timing.fingerprints_agree(fp, ref_prints[k], rel)]
        if bad:
            raise StageFailure("hack_detected", f"timed_output_mismatch: {len(bad)} of {len(prints)} timed outputs "
                                                "differ from the reference (output cached or left unfinished?)")
        cand_t = timing.joined([reply["timing"] for reply in rounds["candidate"]])
        ref_t = timing.joined(rounds["reference"])
        if not cpu and _median(cand_t["times_ms"]) < 0.5 * _median(cand_t["host_ms"]) - 0.05:
            raise StageFailure("hack_detected", "timer_disagreement: CUDA events report far less time than the "
                                                "host clock around the same region")
        ci = timing.speedup_ci(timing.rounds(ref_t), timing.rounds(cand_t))
        cand_stats = timing.summary(cand_t)
        ref_stats = timing.summary(ref_t)
        self.stages["timing"].update({
            "status": "passed", "candidate": cand_stats, "reference": ref_stats,
            "speedup": ref_stats["median_ms"] / cand_stats["median_ms"] if cand_stats["median_ms"] > 0 else None,
            "speedup_ci95": [ci[0], ci[1]],
        })


def host_gpu_lock_paths(gpus: Any) -> str | None:
    """The lock files of these GPUs on this host (the `path` argument of gpu_lock)."""
    return ",".join(f"/tmp/popcorn-gpu{g}.lock" for g in gpus) or None


@contextlib.contextmanager
def profiler_lock() -> Iterator[None]:
    """One Nsight Compute profiled range at a time on this host: a second ncu profiling meanwhile
    fails with "a driver resource was unavailable" (third session on the H200), while sessions that
    only start together, their profiled ranges apart, all profile (twelfth session)."""
    with open("/tmp/popcorn-profiler.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def timing_after_setup(stages: dict[str, Any], lock: str | None, setup: Callable[[], Any],
                       time_alone: Callable[[Any], None], processes: Sequence[Any],
                       device: str | Sequence[str]) -> None:
    """A translation judge's timing: `setup()` (what is not measured: input sets, processes
    started) beside other evaluations' trials under the shared hold, then `time_alone(made)`
    with the GPUs alone; the set-up's seconds, the wait for its hold excluded, go into the
    timing stage as `setup_s`. (The core's Judge.timing does the same with its lock-wait
    accounting and progress lines.) A reference out of GPU memory in either part blames the
    candidate's `processes` if they hold the memory (_candidates_blamed_for_reference_memory)."""
    with _candidates_blamed_for_reference_memory(processes, device, lock):
        with gpu_lock(lock, shared=True):
            t0 = time.perf_counter()
            made = setup()
            setup_s = time.perf_counter() - t0
        try:
            with gpu_lock(lock):
                time_alone(made)
        finally:
            if "timing" in stages:
                stages["timing"]["setup_s"] = round(setup_s, 3)


@contextlib.contextmanager
def gpu_lock(path: str | None, shared: bool = False, waited: Callable[[float], None] | None = None,
             writers_together: bool = True) -> Iterator[None]:
    """A reader-writer lock on the GPUs of an evaluation, shared by every sandbox on the host.

    Timing takes it exclusively; correctness and stress trials take it shared, so no other
    evaluation's kernels run on the GPU while one is timed. Writers go first: a gate that every
    waiting or holding writer holds shared, and a reader passes exclusively, keeps new trials
    out while any writer waits, so queued timings and ncu ranges run one after another and the
    running trials drain once for all of them, not once per writer (a turnstile did that per
    writer until the sixteenth session: scripts/bench_gpu_lock.py, replaying that session's
    pass, put the difference at 7 % of its wall time). Exclusion itself is the main file's.
    `path` names one lock file per GPU, comma-separated (a multi-GPU evaluation holds all
    of its GPUs); they are taken in sorted order, so two evaluations never deadlock.
    `waited(seconds)` hears of a wait over two seconds (a judge's progress log says where its time went).
    `writers_together=False` is the earlier turnstile (a writer holds the gate alone), kept for
    scripts/bench_gpu_lock.py's comparison.
    """
    if not path:
        yield
        return
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        for one in sorted(set(path.split(","))):
            stack.enter_context(_one_gpu_lock(one, shared, writers_together))
        seconds = time.perf_counter() - t0
        if waited and seconds > 2:
            waited(seconds)
        yield


@contextlib.contextmanager
def _one_gpu_lock(path: str, shared: bool, writers_together: bool = True) -> Iterator[None]:
    with open(path + ".gate", "a") as gate, open(path, "a") as main:
        # A reader holds the gate only while it takes the main file shared, which no writer can
        # hold then (a writer holds the gate until it lets the main file go): never a long wait.
        fcntl.flock(gate, fcntl.LOCK_SH if writers_together and not shared else fcntl.LOCK_EX)
        if shared:
            fcntl.flock(main, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(main, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(main, fcntl.LOCK_UN)
            if not shared:
                fcntl.flock(gate, fcntl.LOCK_UN)


CANDIDATE_GPU_SHARE = 0.5  # see Judge._reference_beside


def _free_gpu_bytes(device: str, settle_s: float = 0.5) -> int:
    """Free memory of the whole GPU (every process's allocations count), 0 on the CPU. `settle_s`:
    a stopped process's memory goes back to the driver as the process is torn down."""
    if device == "cpu":
        return 0
    time.sleep(settle_s)
    return torch.cuda.mem_get_info(torch.device(device))[0]


def _total_gpu_bytes(device: str) -> int:
    return 0 if device == "cpu" else torch.cuda.get_device_properties(torch.device(device)).total_memory


def refuse_a_candidate_holding_the_gpu(stop_candidate: Callable[[], None], device: str | Sequence[str]) -> float:
    """After the reference ran out of GPU memory with the GPU alone: stop the candidate's process(es)
    and measure what that freed on each whole GPU named (a multi-GPU judge's ranks sit on several).
    More than CANDIDATE_GPU_SHARE of any one is the submission's failure (runtime_error); otherwise
    return the most bytes freed on one."""
    devices = [device] if isinstance(device, str) else sorted(set(device))
    free_before = {d: _free_gpu_bytes(d, settle_s=0.0) for d in devices}
    stop_candidate()
    freed = {d: _free_gpu_bytes(d) - free_before[d] for d in devices}
    if devices[0] != "cpu":
        torch.cuda.empty_cache()
    for d in devices:
        total = _total_gpu_bytes(d)
        if total and freed[d] > CANDIDATE_GPU_SHARE * total:
            where = f" ({d})" if len(devices) > 1 else ""
            raise StageFailure("runtime_error", f"out_of_memory: the reference ran out of GPU memory while the "
                                                f"submission's process held {freed[d] / 2**30:.1f} GiB of the GPU's "
                                                f"{total / 2**30:.0f} GiB{where} between calls")
    return max(freed.values())


def reference_without_candidate(compute: Callable[[], Any], stop_candidate: Callable[[], None],
                                device: str) -> tuple[Any, str]:
    """After the reference ran out of GPU memory with the GPU alone: refuse_a_candidate_holding_the_gpu
    (an honest submission holds little between calls), then the reference computed with the candidate
    stopped (out of memory again: its own need, the judge's failure) and a note for the trial's record.
    The caller starts the candidate again. Shared by the core and translation judges (docs/decisions.md,
    "Infra vs model")."""
    freed = refuse_a_candidate_holding_the_gpu(stop_candidate, device)
    ref = compute()
    return ref, (f"the reference ran out of GPU memory beside the candidate's process ({freed / 2**30:.1f} GiB "
                 f"freed when it stopped); it ran with that process stopped, then the candidate restarted")


@contextlib.contextmanager
def _candidates_blamed_for_reference_memory(processes: Sequence[Any], device: str | Sequence[str],
                                            lock: str | None) -> Iterator[None]:
    """Around a translation judge's timing. If it fails because a reference ran out of GPU memory
    (the judge's own, a torch.OutOfMemoryError, or a reference library's process, an infra_error
    naming it), the candidate's processes (the `processes` whose role is "candidate") may hold that
    memory. They are stopped with the GPUs alone, and a submission whose processes held more than
    half a GPU fails with runtime_error (refuse_a_candidate_holding_the_gpu, which measures nothing
    on a CPU); otherwise the error stands, the judge's. Without this, a submission that grabs
    memory after its correctness trials would turn its own slow timing into an infra_error, which
    no rate counts."""
    try:
        yield
    except (torch.OutOfMemoryError, StageFailure) as exc:
        if _reference_out_of_memory(exc):
            def stop_candidates() -> None:
                for process in processes:
                    if process.role == "candidate":
                        process.kill()

            with gpu_lock(lock):  # what stopping them frees, measured while no other evaluation runs
                refuse_a_candidate_holding_the_gpu(stop_candidates, device)
        raise


def _reference_out_of_memory(exc: BaseException) -> bool:
    """_out_of_memory's twin for the reference's side: its libraries' errors are infra_error, and
    a CUDA library's own message reads "out of memory" (cudaGetErrorString), not torch's."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, StageFailure) and exc.failure_class == "infra_error" and (
        "OutOfMemoryError" in exc.detail or "out of memory" in exc.detail.lower())


def _out_of_memory(exc: BaseException) -> bool:
    """The reference's or the candidate's trial ran out of GPU memory."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, StageFailure) and exc.failure_class == "runtime_error" and (
        "OutOfMemoryError" in exc.detail or "CUDA out of memory" in exc.detail)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if s else 0.0


def _gpu_hold_bytes() -> int:
    free, _ = torch.cuda.mem_get_info()
    return int(min(16 << 30, free * 0.3))


def device_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"type": "cuda" if device.startswith("cuda") else "cpu", "torch": torch.__version__}
    if info["type"] == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, sms=props.multi_processor_count, memory_bytes=props.total_memory,
                    cuda=torch.version.cuda, capability=f"{props.major}.{props.minor}")
    else:
        import platform
        info["name"] = platform.processor() or platform.machine()
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        pass
    return info


def run_stages(run: Any, close: Any, stages: dict[str, Any], result: dict[str, Any]) -> None:
    """Run a judge's stages, turn the first StageFailure into the result's failure class,
    and fill `stages` and `passed_disclosed` (shared by every judge)."""
    try:
        run()
    except StageFailure as exc:
        result["failure_class"], result["failure_detail"] = exc.failure_class, exc.detail
        stages.setdefault("load", {"status": "failed", "message": exc.detail[:2000]})
    finally:
        close()
    for st in stages.values():
        if st.get("status") == "failed" and result["failure_class"] is None:
            st["status"] = "error"
    result["stages"] = stages
    result["passed_disclosed"] = stages.get("correctness", {}).get("status") == "passed"


def judge(job: dict[str, Any]) -> dict[str, Any]:
    from orchestrator.runner import distributed

    if distributed.is_collectives(job):  # one candidate process per rank
        return distributed.judge(job)
    device = job["device"] = "cuda:0" if job["device"] == "cuda" else job["device"]
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        torch.cuda.set_device(torch.device(device))
    j = Judge(job)
    log_path = job.get("log_path") or os.path.join(tempfile.mkdtemp(prefix="popcorn-cand-"), "candidate.log")
    result: dict[str, Any] = {"failure_class": None, "failure_detail": "", "device": device_info(device),
                              "stress_seed": j.seed if j.mode == "full" else None}
    cand = Candidate(job["solution"], device, log_path)

    def close() -> None:
        cand.close()
        j.close()

    run_stages(lambda: j.run(cand), close, j.stages, result)
    try:
        with open(log_path, errors="replace") as f:
            result["candidate_log"] = f.read()[-8000:]
    except OSError:
        result["candidate_log"] = ""
    return result


def sign(payload: str, nonce: str) -> str:
    return hmac.new(bytes.fromhex(nonce), payload.encode(), hashlib.sha256).hexdigest()


def parse_verdict(stdout: str, nonce: str) -> dict[str, Any] | None:
    """The judge's verdict from its stdout, if a correctly signed line is there."""
    for line in reversed(stdout.splitlines()):
        if not line.startswith(VERDICT_PREFIX):
            continue
        payload, _, mac = line[len(VERDICT_PREFIX):].rpartition(" ")
        if hmac.compare_digest(sign(payload, nonce), mac):
            return json.loads(payload)
    return None


def serve_verdict(judge_fn: Any) -> int:
    """The judge process's main: a job on stdin, one signed verdict line on stdout."""
    _make_undumpable()
    job = json.loads(sys.stdin.read())
    nonce = job.pop("nonce")
    try:
        result = judge_fn(job)
    except Exception:  # the judge's own failure: reported as infra, never as a pass
        result = {"failure_class": "infra_error", "failure_detail": traceback.format_exc()[-4000:], "stages": {}}
    payload = json.dumps(result, default=str)
    sys.stdout.write(f"\n{VERDICT_PREFIX}{payload} {sign(payload, nonce)}\n")
    sys.stdout.flush()
    return 0


def main() -> int:
    return serve_verdict(judge)


if __name__ == "__main__":
    raise SystemExit(main())
