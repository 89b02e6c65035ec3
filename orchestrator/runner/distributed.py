"""Scoring of collectives problems: one candidate process per rank over torch.distributed.

`judge.judge()` hands a job here when the problem's manifest says "collectives": true.
Everything else is judge.py's: the job, the stages (load -> correctness with fresh,
in-place and repeated inputs -> stress on hidden shapes -> timing), the failure classes,
the candidate's process checks (candidate.Server) and the signed verdict.

- World size: `job["world_size"]`, else the manifest's `world_size.default`; any
  N >= 2 within the manifest's range. Backend gloo on a CPU, NCCL on GPUs with rank r
  on cuda:r. NCCL_NVLS_ENABLE=0 always (no NVLink multicast).
- Inputs: the judge draws every rank's shard itself,
  `get_inputs(shape, generator, device, rank=r, world_size=w)` from one trial seed.
- Reference (decision): the problem's own torch.distributed `Model`, run in W trusted
  rank processes of their own (a separate process group, its own rendezvous port),
  started from the problem folder only, never from the submission. The reference is
  then exactly what the problem author wrote (no second single-process version to keep
  in sync); each problem's test_reference.py proves that its ranks agree with the
  single-process math. Every rank's candidate output is compared with the same rank's
  reference output under the manifest's tolerance; `tolerance_scale`, if defined,
  receives that rank's inputs and output.
- Timing: every timed iteration is closed on every rank by a device-wide synchronize and
  a barrier (bound before the submission is imported), so a rank cannot stop its clock
  while a peer still works; time = max over ranks of the per-rank median (CUDA events
  on GPUs); its samples and interval come from that slowest rank. Same for the reference.
- The local sandbox has a fresh network namespace whose loopback is down: the judge
  brings `lo` up (it is root in its user namespace) so gloo/NCCL can rendezvous on
  127.0.0.1; nothing outside is reachable either way.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import fcntl
import multiprocessing as mp
import os
import socket
import struct
import tempfile
import time
from typing import Any

import torch
import torch.distributed as dist

from orchestrator.runner import candidate, timing
from orchestrator.runner.gpuload import GpuLoads
from orchestrator.runner.judge import (LOADED_NOTE, Candidate, Judge, StageFailure, _median, calls_per_trial, device_info,
                                       first_wrong, loaded_fields, progress)
from orchestrator.runner.problem import tree_digest
from orchestrator.runner.shapes import Shape, shape_key

# Bound before any submission is imported (like timing.py's timer functions).
_barrier = dist.barrier
_cuda_sync = torch.cuda.synchronize
WATCHED_COLLECTIVES = ("barrier", "all_reduce", "all_gather", "all_to_all_single", "broadcast")
_ORIGINAL_COLLECTIVES = {name: getattr(dist, name) for name in WATCHED_COLLECTIVES}

RANK_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
LOAD_TIMEOUT_S = 300.0  # W interpreters importing torch at once on a busy host
REF_SHIM = "from orchestrator.runner.problem import import_file\n" \
           "ModelNew = import_file({path!r}, 'popcorn_reference').Model\n"


# ----------------------------------------------------------------------- rank side


class _ClosedRegion:
    """model(*inputs), then a device-wide synchronize and a barrier on this rank: the
    timed region ends only when every rank has finished all its work."""

    def __init__(self, model: Any, cuda: bool):
        self.model, self.cuda = model, cuda

    def __call__(self, *inputs: Any) -> Any:
        out = self.model(*inputs)
        if self.cuda:
            _cuda_sync()
        _barrier()
        return out


class RankServer(candidate.Server):
    """candidate.Server for one rank: the same checks, a closed timing region, and a flag
    when the submission replaces torch.distributed's functions."""

    def flags_after_call(self) -> list[str]:
        flags = super().flags_after_call()
        return flags + [f"timer_tampered:torch.distributed.{name}" for name, fn in _ORIGINAL_COLLECTIVES.items()
                        if getattr(dist, name) is not fn]

    def time(self, msg: dict[str, Any]) -> dict[str, Any]:
        key = msg["key"]
        model = self.models[key]
        self.models[key] = _ClosedRegion(model, self.device.startswith("cuda"))
        try:
            return super().time(msg)
        finally:
            self.models[key] = model


def serve_rank(conn: Any, device: str, log_path: str, rank: int, world_size: int, backend: str,
               init_method: str, timeout_s: float) -> None:
    """Entry point of one rank's process: join the process group, then serve like a candidate."""
    os.environ.update(RANK_ENV)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)  # rendezvous and NCCL messages go to the rank's log, never the verdict
    os.dup2(log, 2)
    kwargs: dict[str, Any] = {}
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        kwargs["device_id"] = torch.device(device)
    else:  # ranks share the host's cores: oversubscribed OpenMP pools spin and distort timings 10-100x
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // world_size))
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size,
                            timeout=dt.timedelta(seconds=timeout_s), **kwargs)
    candidate.Server = RankServer  # this process only: serve() builds its server from this name
    try:
        candidate.serve(conn, device, log_path)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# ---------------------------------------------------------------------- judge side


def bring_up_loopback() -> None:
    """Set IFF_UP on `lo` if it is down (a fresh network namespace); no-op otherwise."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, siocgifflags, req))[1]
        if not flags & iff_up:
            fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RankCandidate(Candidate):
    """judge.Candidate whose process is one rank of a process group."""

    def __init__(self, solution: str, device: str, log_path: str, rank: int, world_size: int, backend: str,
                 init_method: str, timeout_s: float):
        ctx = mp.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=serve_rank, daemon=True,
                                args=(child_conn, device, log_path, rank, world_size, backend, init_method, timeout_s))
        self.proc.start()
        child_conn.close()
        self.log_path, self.solution = log_path, solution


class RankGroup:
    """W rank processes of one role (candidate or reference); every op goes to all ranks at
    once, because a collective blocks until every rank has entered it."""

    def __init__(self, role: str, solution: str, devices: list[str], backend: str, log_prefix: str,
                 timeout_s: float):
        self.role, self.world_size = role, len(devices)
        init = f"tcp://127.0.0.1:{free_port()}"
        self.log_paths = [f"{log_prefix}.rank{r}" for r in range(self.world_size)]
        self.ranks = [RankCandidate(solution, dev, self.log_paths[r], r, self.world_size, backend, init, timeout_s)
                      for r, dev in enumerate(devices)]

    def call_all(self, msgs: dict[str, Any] | list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
        """Send one message per rank (or the same to all); the replies in rank order. The first
        rank to fail ends the group (its peers would wait in a collective forever)."""
        per_rank = msgs if isinstance(msgs, list) else [msgs] * self.world_size
        with cf.ThreadPoolExecutor(self.world_size) as pool:
            futures = [pool.submit(c.call, m, timeout_s) for c, m in zip(self.ranks, per_rank)]
            done, _ = cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
            first = next((r for r, f in enumerate(futures) if f in done and f.exception() is not None), None)
            if first is not None:
                self.kill()
        if first is not None:
            exc = futures[first].exception()
            assert isinstance(exc, StageFailure)
            raise StageFailure(exc.failure_class, f"rank {first} of {self.world_size}: {exc.detail}")
        return [f.result() for f in futures]

    def logs(self, limit: int = 8000) -> str:
        parts = []
        for r, path in enumerate(self.log_paths):
            try:
                with open(path, errors="replace") as f:
                    text = f.read()[-limit // self.world_size:]
            except OSError:
                continue
            if text.strip():
                parts.append(f"--- rank {r} ---\n{text}")
        return "\n".join(parts)

    def kill(self) -> None:
        for c in self.ranks:
            c.kill()

    def close(self) -> None:
        for c in self.ranks:
            c.close()


def world_size_of(job: dict[str, Any], manifest: dict[str, Any]) -> int:
    spec = manifest["world_size"]
    n = int(job.get("world_size") or spec["default"])
    if n < max(2, int(spec.get("min", 2))) or n > int(spec.get("max", n)):
        raise StageFailure("infra_error", f"world size {n} is outside [{spec.get('min', 2)}, {spec.get('max')}]")
    return n


class DistributedJudge(Judge):
    """judge.Judge with W ranks: `cand` is a RankGroup; correctness() and stress() are inherited."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.world_size = world_size_of(self.job, self.problem.manifest)
        cpu = self.device == "cpu"
        if not cpu and torch.cuda.device_count() < self.world_size:
            raise StageFailure("infra_error", f"world size {self.world_size} needs as many GPUs; "
                                              f"{torch.cuda.device_count()} visible")
        self.backend = "gloo" if cpu else "nccl"
        self.devices = ["cpu"] * self.world_size if cpu else [f"cuda:{r}" for r in range(self.world_size)]
        self.load = GpuLoads(self.devices)  # a loaded trial loads every rank's GPU
        self.scratch = tempfile.mkdtemp(prefix="popcorn-dist-")
        self.refs: RankGroup | None = None
        self.ref_built: set[str] = set()

    def group(self, role: str, solution: str, log_prefix: str) -> RankGroup:
        return RankGroup(role, solution, self.devices, self.backend, log_prefix,
                         timeout_s=self.trial_timeout * 4 + 60)

    # -- the trusted reference ranks --------------------------------------------------
    def _ref_call(self, msgs: dict[str, Any] | list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
        if self.refs is None:
            shim = os.path.join(self.scratch, "reference_ranks.py")
            with open(shim, "w") as f:
                f.write(REF_SHIM.format(path=str(self.problem.directory / "reference.py")))
            self.refs = self.group("reference", shim, os.path.join(self.scratch, "reference.log"))
            self._ref_call({"op": "load", "solution": shim}, max(LOAD_TIMEOUT_S, self.trial_timeout))
        try:
            return self.refs.call_all(msgs, timeout_s)
        except StageFailure as exc:  # the reference is ours: its failure is never the candidate's
            raise StageFailure("infra_error", f"the reference ranks failed: {exc.detail}\n{self.refs.logs(3000)}")

    def _ref_build(self, shape: Shape) -> None:
        key = shape_key(shape)
        if key not in self.ref_built:
            self._ref_call({"op": "build", "key": key, "init": self.problem.init_inputs(shape)}, self.trial_timeout)
            self.ref_built.add(key)

    def reference_outputs(self, shape: Shape, rank_inputs: list[tuple[Any, ...]]) -> list[Any]:
        self._ref_build(shape)
        replies = self._ref_call([{"op": "forward", "key": shape_key(shape), "inputs": x} for x in rank_inputs],
                                 self.trial_timeout)
        return [r["output"] for r in replies]

    def rank_inputs(self, shape: Shape, seed: int) -> list[tuple[Any, ...]]:
        return [self.problem.inputs(shape, seed, "cpu", rank=r, world_size=self.world_size)
                for r in range(self.world_size)]

    # -- stages (the shared ones call these) ----------------------------------------------
    def run(self, cand: Any) -> None:
        t0 = time.perf_counter()
        progress(f"load: {self.world_size} ranks, {self.backend}")
        with self.gpu_shared():
            cand.call_all({"op": "load", "solution": self.job["solution"]}, max(LOAD_TIMEOUT_S, self.trial_timeout))
            self._build(cand, self.disclosed)
        self.stages["load"] = {"status": "passed", "wall_s": time.perf_counter() - t0, "world_size": self.world_size,
                               "backend": self.backend}
        if self.mode == "compile":
            inputs = self.rank_inputs(self.disclosed, self._seed())
            with self.gpu_shared():
                cand.call_all([{"op": "forward", "key": shape_key(self.disclosed), "inputs": x} for x in inputs],
                              self.trial_timeout)
            return
        self.checked_stages(cand)

    def _build(self, cand: Any, shape: Shape) -> None:
        progress(f"build at {shape}")
        cand.call_all({"op": "build", "key": shape_key(shape), "init": self.problem.init_inputs(shape)},
                      self.trial_timeout)

    def _trial(self, cand: Any, shape: Shape, seed: int, kind: str, record: list[dict] | None,
               reuse_buffers: bool = False, failure: str = "incorrect") -> None:
        progress(f"{'stress' if kind == 'stress' else 'correctness'} trial {len(record or []) + 1} ({kind})")
        key, calls = os.urandom(16), calls_per_trial(self.job, kind)
        with self.gpu_shared():  # no other evaluation times these GPUs meanwhile (nor uses the host's CPUs much)
            inputs = self.rank_inputs(shape, seed)
            refs = self.reference_outputs(shape, inputs)
            t0 = time.perf_counter()
            with self.load.running(kind == "loaded") as load:  # the calls back to back, checked after
                per_call = [cand.call_all([{"op": "forward", "key": shape_key(shape), "inputs": x, "digest_key": key,
                                            "reuse_buffers": reuse_buffers} for x in inputs], self._trial_limit())
                            for _ in range(calls)]
            wall = time.perf_counter() - t0
            checked = []  # compared under the hold too: comparing may run kernels
            digests = [tree_digest(x, key) for x in inputs]
            for replies in per_call:
                for rank, (reply, digest) in enumerate(zip(replies, digests)):
                    if reply["inputs_digest"] != digest:
                        raise StageFailure("hack_detected", f"input_mutation: rank {rank} modified its input tensors")
                checked.append([self.problem.compare(x, reply["output"], ref)
                                for reply, x, ref in zip(replies, inputs, refs)])
        results, which = first_wrong(checked, passed=lambda ranks: all(r.passed for r in ranks))
        bad = [r for r, res in enumerate(results) if not res.passed]
        entry: dict[str, Any] = {"kind": kind, "shape": shape, "world_size": self.world_size, "passed": not bad,
                                 "message": which + "; ".join(f"rank {r}: {results[r].message}" for r in bad),
                                 "wall_s": wall, "failed_ranks": bad, **loaded_fields(load, calls)}
        for field_name in ("max_abs_err", "rel_norm_err", "mismatch_fraction"):
            values = [getattr(res, field_name) for res in results if getattr(res, field_name) is not None]
            if values:
                entry[field_name] = max(values)
        if record is not None:
            record.append(entry)
        if bad:
            raise StageFailure(failure, f"{kind} trial at shape {shape}, world size {self.world_size}"
                                        f"{LOADED_NOTE if load else ''}, {which}rank {bad[0]}: {results[bad[0]].message}")

    def lock_waited(self, seconds: float) -> None:
        progress(f"waited {seconds:.0f} s for the GPU lock")

    def _fresh_timed_process(self) -> bool:
        """The ranks keep their processes into the timing: new ones would have to form a new
        process group, which is not built (no collectives oracle tunes at its first call)."""
        return False

    def _timing_setup(self, cand: Any) -> dict[str, Any]:
        """Both sides built at the disclosed shape and every rank's input sets (Judge.timing
        makes them under the shared hold)."""
        self._build(cand, self.disclosed)
        self._ref_build(self.disclosed)
        n_sets = int(self.job.get("timing", {}).get("input_sets", 4))
        return {"sets": [self.rank_inputs(self.disclosed, self._seed()) for _ in range(n_sets)]}

    def _timing(self, cand: Any, setup: dict[str, Any]) -> None:
        shape, cpu = self.disclosed, self.device == "cpu"
        t = self.job.get("timing", {})
        iters = int(t.get("iters_cpu" if cpu else "iters", 5 if cpu else 50))
        warmup = int(t.get("warmup", 3))
        hold = int(t.get("hold_bytes", (1 << 30) if cpu else (4 << 30)))
        sets = setup["sets"]
        self.stages["timing"] = {"status": "failed", "unit": "cpu_wall" if cpu else "cuda_events",
                                 "l2_flush": not cpu, "world_size": self.world_size,
                                 "rule": "max over ranks of the per-rank median; every iteration closed by a "
                                         "device synchronize and a barrier on every rank"}
        budget = self.trial_timeout * 4 + iters * 10

        def time_msgs() -> list[dict[str, Any]]:
            return [{"op": "time", "key": shape_key(shape), "input_sets": [s[r] for s in sets], "iters": iters,
                     "warmup": warmup, "hold_bytes": hold,
                     "max_calls_per_region": 1}  # every rank must make the same collective calls
                    for r in range(self.world_size)]

        ref_replies = self._ref_call(time_msgs(), budget)
        cand_replies = cand.call_all(time_msgs(), budget)
        for rank, (c, ref) in enumerate(zip(cand_replies, ref_replies)):
            ref_prints = dict(reversed(ref["fingerprints"]))  # first print of every input set
            rel = timing.fingerprint_rel(self.problem.manifest["tolerance"], hasattr(self.problem.module, "check_output"))
            bad = [k for k, fp in c["fingerprints"] if not timing.fingerprints_agree(fp, ref_prints[k], rel)]
            if bad:
                raise StageFailure("hack_detected", f"timed_output_mismatch: rank {rank}: {len(bad)} of {iters} timed "
                                                    "outputs differ from the reference (output cached or unfinished?)")
            ct = c["timing"]
            if not cpu and _median(ct["times_ms"]) < 0.5 * _median(ct["host_ms"]) - 0.05:
                raise StageFailure("hack_detected", f"timer_disagreement: rank {rank}: CUDA events report far less "
                                                    "time than the host clock around the same region")
        cand_ms = slowest_rank([c["timing"]["times_ms"] for c in cand_replies])
        ref_ms = slowest_rank([r["timing"]["times_ms"] for r in ref_replies])
        cand_stats, ref_stats = timing.stats(cand_ms), timing.stats(ref_ms)
        ci = timing.speedup_ci([ref_ms], [cand_ms])  # one round per side here
        self.stages["timing"].update({
            "status": "passed", "candidate": cand_stats, "reference": ref_stats,
            "candidate_rank_medians_ms": [_median(c["timing"]["times_ms"]) for c in cand_replies],
            "reference_rank_medians_ms": [_median(r["timing"]["times_ms"]) for r in ref_replies],
            "speedup": ref_stats["median_ms"] / cand_stats["median_ms"] if cand_stats["median_ms"] > 0 else None,
            "speedup_ci95": [ci[0], ci[1]],
        })

    def close(self) -> None:
        super().close()
        if self.refs is not None:
            self.refs.close()


def slowest_rank(times_per_rank: list[list[float]]) -> list[float]:
    """The samples of the rank whose median is largest (time = max over ranks of the median)."""
    return max(times_per_rank, key=lambda xs: sorted(xs)[len(xs) // 2])


def judge(job: dict[str, Any]) -> dict[str, Any]:
    """judge.judge() for a collectives problem: the same result record, W ranks."""
    device = job["device"] = "cuda" if job["device"].startswith("cuda") else job["device"]
    os.environ.update(RANK_ENV)  # spawned ranks inherit it
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        bring_up_loopback()
    except OSError:
        pass  # already up (docker --network none) or not ours to change: rendezvous will say
    result: dict[str, Any] = {"failure_class": None, "failure_detail": "", "stress_seed": None,
                              "device": device_info("cuda:0" if device == "cuda" else device)}
    log_prefix = job.get("log_path") or os.path.join(tempfile.mkdtemp(prefix="popcorn-cand-"), "candidate.log")
    j: DistributedJudge | None = None
    cand: RankGroup | None = None
    try:
        j = DistributedJudge(job)
        result["stress_seed"] = j.seed if j.mode == "full" else None
        result["device"]["world_size"] = j.world_size
        cand = j.group("candidate", job["solution"], log_prefix)
        j.run(cand)
    except StageFailure as exc:
        result["failure_class"], result["failure_detail"] = exc.failure_class, exc.detail
        if j is not None:
            j.stages.setdefault("load", {"status": "failed", "message": exc.detail[:2000]})
    finally:
        if cand is not None:
            cand.close()
        if j is not None:
            j.close()
    stages = j.stages if j is not None else {}
    for st in stages.values():
        if st.get("status") == "failed" and result["failure_class"] is None:
            st["status"] = "error"
    result["stages"] = stages
    result["passed_disclosed"] = stages.get("correctness", {}).get("status") == "passed"
    result["candidate_log"] = cand.logs() if cand is not None else ""
    return result


def is_collectives(job: dict[str, Any]) -> bool:
    """Whether the job's problem is a collectives problem (read from its manifest)."""
    import json

    try:
        with open(os.path.join(job["problem_dir"], "manifest.json")) as f:
            return bool(json.load(f).get("collectives"))
    except (OSError, ValueError, KeyError):
        return False


# -------------------------------------------------------- trusted ranks for tests


def run_reference_ranks(problem_dir: str, shape: Shape, seed: int, world_size: int,
                        dtype: torch.dtype | None = None, timeout_s: float = 300.0) -> list[Any]:
    """Every rank's reference output at `shape` on the CPU (gloo), for a problem's
    test_reference.py: compare them with the single-process math."""
    from orchestrator.runner.problem import cast_floats, load_problem

    problem = load_problem(problem_dir)
    inputs = [problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size) for r in range(world_size)]
    init = problem.init_inputs(shape)
    if dtype is not None:
        inputs, init = [cast_floats(x, dtype) for x in inputs], cast_floats(init, dtype)
    scratch = tempfile.mkdtemp(prefix="popcorn-refranks-")
    shim = os.path.join(scratch, "reference_ranks.py")
    with open(shim, "w") as f:
        f.write(REF_SHIM.format(path=str(problem.directory / "reference.py")))
    group = RankGroup("reference", shim, ["cpu"] * world_size, "gloo", os.path.join(scratch, "ranks.log"), timeout_s)
    try:
        group.call_all({"op": "load", "solution": shim}, timeout_s)
        group.call_all({"op": "build", "key": "k", "init": init}, timeout_s)
        replies = group.call_all([{"op": "forward", "key": "k", "inputs": x} for x in inputs], timeout_s)
    except StageFailure as exc:
        raise RuntimeError(f"{exc.failure_class}: {exc.detail}\n{group.logs()}") from exc
    finally:
        group.close()
    return [r["output"] for r in replies]
