"""The trusted judge of a multi-GPU translation task: `python -m orchestrator.translation.multijudge`.

Same job, stages and signed verdict as judge.py, with `world_size` ranks: every
library (candidate, H100 reference, A100 baseline) runs as one process per GPU
(rankworker.py), ranks share buffers through CUDA IPC (shared.py), each rank's inputs
come from the trial seed and its rank, and every rank's output is compared with the
fp64 reference computed here from all ranks' inputs. Timing releases all ranks
together for every iteration (a spinning barrier on shared memory, rankworker.SpinRelease)
and takes, per iteration, the slowest rank's time; the timing stage reports how far apart
the ranks were released (`release_skew_us`).

The glue (task.py) of a multi-GPU task defines ARGTYPES, OUTPUTS, SHARED (name ->
bytes(shape, world_size) of each per-rank buffer peers can address),
get_inputs(shape, generator, device, rank=, world_size=), launch(entry, inputs, peers,
rank, world_size, stream) where peers maps a SHARED name to the address of an array of
world_size pointers, and reference(all_inputs, rank).
"""
from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import pickle
import random
import tempfile
import time
from typing import Any, Callable

import torch

from orchestrator.runner import timing, wire
from orchestrator.runner.compare import compare_outputs
from orchestrator.runner.gpuload import GpuLoads
from orchestrator.runner.judge import (LOADED_NOTE, calls_per_trial, first_wrong, forged_message, gpu_lock,
                                       loaded_fields, loaded_trial_count, reference_without_candidate, stress_trials,
                                       timed_stages, timing_after_setup)
from orchestrator.runner.judge import StageFailure, device_info, run_stages, serve_verdict
from orchestrator.runner.problem import import_file, to_device
from orchestrator.runner.shapes import Shape, default_shape, stress_shapes
from orchestrator.translation.shared import HostShared


MULTI_HOLD_BYTES = 4 << 30  # a region's fresh input copies, per rank
LOAD_TIMEOUT_S = 180.0  # starting an interpreter and importing torch, per rank, on a busy host


class RankGroup:
    """One library as `world_size` rank processes sharing a barrier."""

    def __init__(self, role: str, job: dict[str, Any], library: str, log_dir: str, timeout_s: float,
                 shared_sizes: dict[str, int]):
        self._args = (role, job, library, log_dir, timeout_s, shared_sizes)
        ctx = mp.get_context("spawn")
        self.role, self.timeout = role, timeout_s
        self.world_size = int(job["world_size"])
        self.barrier = ctx.Barrier(self.world_size)
        # SpinRelease's generations and abort flag; job timing "release": "barrier" keeps the old release
        spin = job.get("timing", {}).get("release", "spin") != "barrier"
        self.release = ctx.RawArray(ctypes.c_int64, self.world_size + 1) if spin else None
        from orchestrator.translation import rankworker

        self.conns, self.procs = [], []
        for rank in range(self.world_size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=rankworker.serve_rank, daemon=True,
                               args=(child, job, library, rank, self.barrier,
                                     os.path.join(log_dir, f"{role}.rank{rank}.log"), self.release))
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        self.log_dir = log_dir
        self._gather("load", max(timeout_s, LOAD_TIMEOUT_S))
        handles = self.call_all([{"op": "alloc", "sizes": shared_sizes}] * self.world_size, "alloc")
        names = list(shared_sizes)
        table = {n: [h["handles"][n] for h in handles] for n in names}
        self.call_all([{"op": "open", "handles": table}] * self.world_size, "open")
        HostShared.unlink([h for per_rank in table.values() for h in per_rank])

    def _failure(self) -> str:
        return "runtime_error" if self.role == "candidate" else "infra_error"

    def _rank_died(self, rank: int, when: str) -> StageFailure:
        """A rank found dead: its exit code and log, every rank stopped."""
        self.procs[rank].join(timeout=5)
        detail = (f"{self.role}: rank {rank} died {when} "
                  f"(exit code {self.procs[rank].exitcode}){self.log_tail(rank)}")
        self.kill()
        return StageFailure(self._failure(), detail)

    def _gather(self, what: str, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Every rank's reply; a rank that dies is reported at once, not after the others time out."""
        limit = timeout_s or self.timeout
        deadline = time.monotonic() + limit
        replies: dict[int, dict[str, Any]] = {}
        pending = dict(enumerate(self.conns))
        while pending:
            ready = mp_connection.wait(list(pending.values()), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                late = sorted(pending)
                self.kill()
                raise StageFailure("timeout" if self.role == "candidate" else "infra_error",
                                   f"{self.role}: rank(s) {late}: {what} did not finish within {limit:.0f} s")
            for rank in [r for r, c in pending.items() if c in ready]:
                try:
                    replies[rank] = wire.recv(pending.pop(rank))
                except pickle.UnpicklingError as exc:
                    self.kill()
                    raise forged_message(exc, f"{self.role} rank {rank}'s process", untrusted=self.role == "candidate")
                except (EOFError, OSError):
                    raise self._rank_died(rank, f"during {what}")
        errors = []
        for rank in sorted(replies):
            reply = replies[rank]
            if not reply.get("ok"):
                kind = reply.get("kind", "runtime_error") if self.role == "candidate" else "infra_error"
                errors.append((kind, f"{self.role}: {reply.get('error', 'unknown error')}"))
        if errors:  # report the root cause, not the ranks that only saw a broken barrier
            kind, detail = next((e for e in errors if "barrier broken" not in e[1]), errors[0])
            raise StageFailure(kind, detail)
        return [replies[r] for r in range(self.world_size)]

    def call_all(self, msgs: list[dict[str, Any]], what: str, timeout_s: float | None = None) -> list[dict[str, Any]]:
        for rank, (conn, msg) in enumerate(zip(self.conns, msgs)):
            try:
                wire.send(conn, msg)
            except OSError:  # gone already: it crashed, or we killed it after a forged reply
                raise self._rank_died(rank, f"before {what}") from None
        return self._gather(what, timeout_s)

    def log_tail(self, rank: int, n: int = 2000) -> str:
        try:
            with open(os.path.join(self.log_dir, f"{self.role}.rank{rank}.log"), "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - n))
                text = f.read().decode(errors="replace").strip()
        except OSError:
            return ""
        return f"; its output ends with:\n{text}" if text else ""

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=10)

    def restart(self) -> None:
        """Fresh rank processes with the library loaded and the shared buffers exchanged, in place of these."""
        self.kill()
        for conn in self.conns:
            conn.close()
        self.__init__(*self._args)

    def close(self) -> None:
        for conn, proc in zip(self.conns, self.procs):
            try:
                if proc.is_alive():
                    wire.send(conn, {"op": "exit"})
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=10)
        self.kill()


class MultiJudge:
    def __init__(self, job: dict[str, Any]):
        self.job = job
        self.manifest = json.loads(open(os.path.join(job["task_dir"], "manifest.json")).read())
        self.glue = import_file(os.path.join(job["task_dir"], "task.py"), "popcorn_translation_glue")
        self.world_size = int(job["world_size"])
        self.devices = job["devices"]
        self.cuda = self.devices[0].startswith("cuda")
        self.mode = job.get("mode", "full")
        seed = job.get("seed")
        self.seed = int(seed) if seed is not None else int.from_bytes(os.urandom(8), "little") >> 2
        self.rng = random.Random(self.seed)
        self.loaded_rng = random.Random(f"loaded-{self.seed}")  # as the single judges': other trials keep their seeds
        self.load = GpuLoads(self.devices)  # a loaded trial loads every rank's GPU
        self.timeout = float(job.get("trial_timeout_s") or self.manifest["time_limits"]["trial_s"])
        self.disclosed = default_shape(self.manifest["shapes"], "cuda" if self.cuda else "cpu")
        self.shapes = [self.disclosed]
        if self.mode == "full":
            self.shapes += stress_shapes(self.manifest["shapes"], self.manifest.get("constraints", []),
                                         int(job.get("stress", 8)), self.rng.getrandbits(62),
                                         "cuda" if self.cuda else "cpu")
        self.stages: dict[str, Any] = {}
        self.log_dir = job.get("log_dir") or tempfile.mkdtemp(prefix="popcorn-trm-")
        os.makedirs(self.log_dir, exist_ok=True)
        self.open: list[RankGroup] = []
        self.skews: dict[str, list[float]] = {}  # role -> release skew (us) of every timed iteration
        self.most_calls = int(job.get("timing", {}).get("calls_per_region", timing.MAX_CALLS_PER_REGION))

    def shared_sizes(self) -> dict[str, int]:
        """Each shared buffer sized for the largest shape this run will use (allocated once)."""
        return {name: max(int(fn(dict(s), self.world_size)) for s in self.shapes)
                for name, fn in getattr(self.glue, "SHARED", {}).items()}

    def group(self, role: str) -> RankGroup:
        g = RankGroup(role, self.job, self.job["libraries"][role], self.log_dir, self.timeout, self.shared_sizes())
        self.open.append(g)
        return g

    def rank_inputs(self, shape: Shape, seed: int) -> list[tuple[Any, ...]]:
        out = []
        for rank in range(self.world_size):
            gen = torch.Generator().manual_seed((seed * 1_000_003 + rank) & 0x7FFF_FFFF_FFFF_FFFF)
            out.append(tuple(self.glue.get_inputs(dict(shape), gen, "cpu", rank=rank, world_size=self.world_size)))
        return out

    def references(self, all_inputs: list[tuple[Any, ...]]) -> list[Any]:
        """Every rank's expected output, computed here on the first rank's device."""
        device = self.devices[0]
        with torch.no_grad():
            on_device = [to_device(i, device) for i in all_inputs]
            return [to_device(self.glue.reference(on_device, rank), "cpu") for rank in range(self.world_size)]

    def run(self) -> None:
        t0 = time.perf_counter()
        cand = self.group("candidate")
        self.stages["load"] = {"status": "passed", "wall_s": time.perf_counter() - t0}
        if self.mode == "compile":
            return
        timed_stages(self.stages, self.mode, cand, self.correctness, self.stress, self.timing)

    def correctness(self, cand: RankGroup) -> None:
        trials: list[dict[str, Any]] = []
        self.stages["correctness"] = {"status": "failed", "shape": self.disclosed, "trials": trials,
                                      "world_size": self.world_size}
        loaded = loaded_trial_count(self.job, "cuda" if self.cuda else "cpu")
        for kind in ["fresh"] * max(int(self.job.get("trials", 3)), 1) + ["loaded"] * loaded:
            self._trial(cand, self.disclosed, kind, trials, "incorrect")
        self.load.close()  # its buffers are not needed past correctness
        self.stages["correctness"]["status"] = "passed"

    def stress(self, cand: RankGroup) -> None:
        stress_trials(self.stages, self.seed, self.shapes[1:],
                      lambda shape, record: self._trial(cand, shape, "stress", record, "stress_failed"))

    def _trial(self, group: RankGroup, shape: Shape, kind: str, record: list[dict[str, Any]], failure: str) -> None:
        # Shared, like the core's trials: beside other evaluations' trials, never during their timing.
        calls, lock, restarted = calls_per_trial(self.job, kind), self.job.get("gpu_lock"), None
        with gpu_lock(lock, shared=True):
            all_inputs = self.rank_inputs(shape, (self.loaded_rng if kind == "loaded" else self.rng).getrandbits(62))
            written = tuple(getattr(self.glue, "OUTPUTS", ()))
            t0 = time.perf_counter()
            with self.load.running(kind == "loaded") as load:  # the calls back to back, checked after
                per_call = [group.call_all([{"op": "run", "inputs": inp, "outputs": written} for inp in all_inputs],
                                           "run") for _ in range(calls)]
            wall = time.perf_counter() - t0
            try:
                refs = self.references(all_inputs)
            except torch.OutOfMemoryError:  # perhaps held by the candidate's ranks (as in the single judge)
                refs = None
        if refs is None:
            with gpu_lock(lock, shared=False):
                refs, restarted = reference_without_candidate(lambda: self.references(all_inputs), group.kill,
                                                              self.devices[0])
            group.restart()
        for replies in per_call:
            for rank, reply in enumerate(replies):
                if reply["mutated_inputs"]:
                    raise StageFailure("hack_detected", f"input_mutation: rank {rank} modified input(s) "
                                                        f"{reply['mutated_inputs']}, which it only reads")
        checked = [[compare_outputs(reply["output"], refs[rank], self.manifest["tolerance"])
                    for rank, reply in enumerate(replies)] for replies in per_call]
        results, which = first_wrong(checked, passed=lambda ranks: all(r.passed for r in ranks))
        for rank, result in enumerate(results):
            record.append({"kind": kind, "shape": {**shape, "rank": rank}, "passed": result.passed,
                           "message": which + result.message, "wall_s": wall, "max_abs_err": result.max_abs_err,
                           "rel_norm_err": result.rel_norm_err, "mismatch_fraction": result.mismatch_fraction,
                           **({"candidate_restarted": restarted} if restarted else {}),
                           **loaded_fields(load, calls)})
            if not result.passed:
                raise StageFailure(failure, f"{kind} trial at shape {shape}{LOADED_NOTE if load else ''}, {which}"
                                            f"rank {rank} of {self.world_size}: {result.message}")

    def _time(self, group: RankGroup, sets: Callable[[], dict[str, Any]], iters: int, warmup: int,
              regions: timing.RegionSizes, name: str, nbytes: int) -> list[float]:
        calls = regions.request(name)
        if not calls:  # the ranks' single-call regions size them, alike on every rank
            single = min(self._time_rounds(group, sets, timing.SIZING_REGIONS, warmup, 1))
            calls = timing.calls_per_region(single, nbytes, MULTI_HOLD_BYTES, self.most_calls)
            warmup = 0
        regions.note(name, calls)
        return self._time_rounds(group, sets, iters, warmup, calls)

    def _time_rounds(self, group: RankGroup, sets: Callable[[], dict[str, Any]], iters: int, warmup: int,
                     calls: int) -> list[float]:
        shipped = sets().get("input_sets")
        msgs = [{"op": "time", **({"input_sets": [s[rank] for s in shipped]} if shipped else {}), "iters": iters,
                 "warmup": warmup, "calls_per_region": calls} for rank in range(self.world_size)]
        replies = group.call_all(msgs, "time", self.timeout * 4 + iters * calls * 10)
        released = [r["timing"].get("release_ns", []) for r in replies]
        self.skews.setdefault(group.role, []).extend((max(ts) - min(ts)) / 1e3 for ts in zip(*released))
        per_rank = [r["timing"]["times_ms"] for r in replies]
        return [max(ts) for ts in zip(*per_rank)]  # a region ends when its slowest rank does

    def skew_report(self) -> dict[str, dict[str, float]]:
        """Per library: how far apart (microseconds) its ranks were released, over the timed iterations."""
        report = {}
        for role, skews in self.skews.items():
            ordered = sorted(skews)
            if ordered:
                report[role] = {"median": ordered[len(ordered) // 2], "p90": ordered[int(0.9 * (len(ordered) - 1))],
                                "max": ordered[-1]}
        return report

    def timing(self, cand: RankGroup) -> None:
        # The candidate is timed in fresh process(es), as the H100 reference is, so both start
        # from the same state. The one that had run the stress shapes (grown scratch buffers, a
        # fragmented allocator) was the slower side in every H100-against-itself comparison that
        # missed 1.0 (seventh and eighth sessions), with identical SASS: the suspected cause.
        cand.close()
        # The input sets made and both sides' rank groups started beside other evaluations'
        # trials, as in the single-GPU judge; only the timed rounds hold the GPUs alone.
        timing_after_setup(self.stages, self.job.get("gpu_lock"), self._timing_setup, lambda made: self._timing(*made),
                           self.open, self.devices)

    def _timing_setup(self) -> tuple[list[list[tuple[Any, ...]]], dict[str, timing.Replicas]]:
        t = self.job.get("timing", {})
        sets = [self.rank_inputs(self.disclosed, self.rng.getrandbits(62)) for _ in range(int(t.get("input_sets", 4)))]
        return sets, timing.replica_sides(self.group("candidate"), self.group, t.get("processes", 2), sets)

    def _timing(self, sets: list[list[tuple[Any, ...]]], sides: dict[str, timing.Replicas]) -> None:
        t = self.job.get("timing", {})
        iters, warmup = int(t.get("iters", 50)), int(t.get("warmup", 3))
        self.stages["timing"] = {"status": "failed", "unit": "cuda_events" if self.cuda else "cpu_wall",
                                 "l2_flush": self.cuda, "shape": self.disclosed, "world_size": self.world_size}
        nbytes = timing._nbytes(sets[0][0])
        regions = timing.RegionSizes(list(sides))
        timers = {name: side.timer(lambda group, payload, n, w, name=name:
                                   self._time(group, payload, n, w, regions, name, nbytes), warmup)
                  for name, side in sides.items()}
        rounds = timing.interleaved(timers, iters, warmup,  # the budget counts whole regions
                                    **timing.budget(t, not self.cuda,
                                                    lambda name, chunk: [x * regions.used[name][0] for x in chunk]))
        for side in sides.values():
            side.close()
        cand_stats, ref_stats = ({**timing.stats([x for chunk in rounds[name] for x in chunk],
                                                 calls_per_region=regions.used[name],
                                                 round_sizes=[len(c) for c in rounds[name]]),
                                  "round_processes": sides[name].rounds}
                                 for name in ("candidate", "reference"))
        ci = timing.speedup_ci(rounds["reference"], rounds["candidate"], ref_processes=sides["reference"].rounds,
                               cand_processes=sides["candidate"].rounds)
        entry = {"status": "passed", "candidate": cand_stats, "reference": ref_stats,
                 "speedup": ref_stats["median_ms"] / cand_stats["median_ms"] if cand_stats["median_ms"] > 0 else None,
                 "speedup_ci95": [ci[0], ci[1]]}
        if self.job["libraries"].get("a100"):
            try:
                base = self.group("a100")
                base_ms = self._time(base, timing.ships_once(sets), ref_stats["n"], warmup,
                                     timing.RegionSizes(["baseline"]), "baseline", nbytes)
                base.close()
                entry["baseline"] = timing.stats(base_ms)
                entry["speedup_vs_baseline"] = entry["baseline"]["median_ms"] / cand_stats["median_ms"]
                entry["reference_over_baseline"] = entry["baseline"]["median_ms"] / ref_stats["median_ms"]
            except StageFailure as exc:  # e.g. vLLM's all-reduce supports 2, 4, 6 or 8 ranks only
                entry["baseline_error"] = exc.detail[:2000]
        entry["release_skew_us"] = self.skew_report()
        self.stages["timing"].update(entry)

    def close(self) -> None:
        for g in self.open:
            g.close()
        self.load.close()


def judge(job: dict[str, Any]) -> dict[str, Any]:
    if job["devices"][0].startswith("cuda"):
        torch.cuda.set_device(torch.device(job["devices"][0]))
    j = MultiJudge(job)
    result: dict[str, Any] = {"failure_class": None, "failure_detail": "", "device": device_info(job["devices"][0]),
                              "stress_seed": j.seed if j.mode == "full" else None, "world_size": j.world_size}
    run_stages(j.run, j.close, j.stages, result)
    return result


def main() -> int:
    return serve_verdict(judge)


if __name__ == "__main__":
    raise SystemExit(main())
