"""How the multi-GPU judge releases its ranks into a timed iteration, checked on a CPU.

The H100 reference of tr-vllm-custom-allreduce timed 1.19x [1.067, 1.355] against
itself on two H200s (1.093x the session before): same source and build, the same
minimum time (0.098 vs 0.100 ms) but a far wider spread on the reference's side. Each
rank starts its clock when it leaves the release barrier, and an all-reduce on the
first rank out waits for the last; the multiprocessing barrier wakes its waiters
through semaphores and a handshake (several context switches), so the clock also
measured how fast a group's processes woke up, which depends on where the OS placed
them. Timed iterations are now released by rankworker.SpinRelease: every rank spins
on a shared array until all have arrived, and the timing stage reports the release
skew it achieved.

Here: SpinRelease lets no rank out before every rank is in, an abort or a missing rank
raises instead of hanging, and tr-vllm-custom-allreduce's own glue runs correctness,
stress and timing through the judge with a host stand-in, reporting the skew of every
library's ranks.
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.translation.catalog import find_task
from orchestrator.translation.rankworker import SpinRelease

GENERATIONS = 40


def _rank_loop(slots: Any, rank: int, world_size: int, seed: int, out: Any) -> None:
    spin, rng, record = SpinRelease(slots, rank, world_size), random.Random(seed), []
    for _ in range(GENERATIONS):
        time.sleep(rng.random() * 0.002)  # ranks arrive in a different order every generation
        arrived = time.perf_counter_ns()
        left = spin.wait(30.0)
        record.append((arrived, left))
    out.put((rank, record))


def test_no_rank_leaves_before_every_rank_arrived() -> None:
    ctx = mp.get_context("fork")  # the test module is not importable by name in a spawned child
    world_size = 3
    slots, out = ctx.RawArray(ctypes.c_int64, world_size + 1), ctx.Queue()
    procs = [ctx.Process(target=_rank_loop, args=(slots, r, world_size, r, out)) for r in range(world_size)]
    for p in procs:
        p.start()
    records = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in procs)
    for g in range(GENERATIONS):
        last_in = max(records[r][g][0] for r in range(world_size))
        first_out = min(records[r][g][1] for r in range(world_size))
        assert first_out >= last_in, f"generation {g}: a rank left {last_in - first_out} ns before the last arrived"
    assert list(slots[:world_size]) == [GENERATIONS] * world_size and slots[world_size] == 0


def test_an_abort_or_a_missing_rank_breaks_the_wait_instead_of_hanging() -> None:
    slots = (ctypes.c_int64 * 3)()
    waiter, peer = SpinRelease(slots, 0, 2), SpinRelease(slots, 1, 2)
    t0 = time.monotonic()
    with pytest.raises(threading.BrokenBarrierError):  # rank 1 never arrives
        waiter.wait(0.3)
    assert 0.3 <= time.monotonic() - t0 < 10 and slots[2] == 1  # and it tells the others
    slots[2] = 0
    timer = threading.Timer(0.2, peer.abort)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(threading.BrokenBarrierError):
        waiter.wait(60.0)
    assert time.monotonic() - t0 < 10
    timer.join()


# entry.h of tr-vllm-custom-allreduce on the host: copy the input into the rank's shared
# buffer, announce a generation in the rank's flags, wait for every peer's, sum in fp32,
# round once to the 16-bit type, wait again before a later call may overwrite the buffer.
ALLREDUCE = r"""
#include <sched.h>
#include <stdint.h>
#include <string.h>
static void wait_all(void* const* flags, int ws, int slot, uint32_t gen) {
  for (int j = 0; j < ws; j++)
    while (__atomic_load_n((uint32_t*)flags[j] + slot, __ATOMIC_ACQUIRE) < gen) sched_yield();
}
static float bf16_to_float(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t float_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
int popcorn_allreduce(int rank, int ws, void* const* bufs, void* const* flags, const void* input, void* output,
                      size_t numel, int bf16, void* stream) {
  uint32_t* me = (uint32_t*)flags[rank];
  uint32_t gen = ++me[64];
  memcpy(bufs[rank], input, numel * 2);
  __atomic_store_n(&me[0], gen, __ATOMIC_RELEASE);
  wait_all(flags, ws, 0, gen);
  for (size_t i = 0; i < numel; i++) {
    float s = 0.f;
    for (int j = 0; j < ws; j++) {
      uint16_t v = ((const uint16_t*)bufs[j])[i];
      _Float16 h; memcpy(&h, &v, 2);
      s += bf16 ? bf16_to_float(v) : (float)h;
    }
    if (bf16) ((uint16_t*)output)[i] = float_to_bf16(s);
    else ((_Float16*)output)[i] = (_Float16)s;
  }
  __atomic_store_n(&me[1], gen, __ATOMIC_RELEASE);
  wait_all(flags, ws, 1, gen);
  return 0;
}
"""


def _allreduce_job(tmp_path: Path, source: str, **keys: Any) -> dict[str, Any]:
    """A multi judge's job for tr-vllm-custom-allreduce on two CPU ranks, every side `source` built by the host."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    src, lib = tmp_path / "allreduce.c", tmp_path / "allreduce.so"
    src.write_text(source)
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", str(src), "-o", str(lib)], check=True)
    task = find_task("tr-vllm-custom-allreduce", REPO_ROOT / "translation")
    return {"task_dir": str(task.path), "symbol": task.manifest["entry"]["symbol"], "world_size": 2,
            "devices": ["cpu"] * 2, "seed": 3, "libraries": {"candidate": str(lib), "h100": str(lib), "a100": str(lib)},
            "trial_timeout_s": 60, "log_dir": str(tmp_path / "logs"), **keys}


@pytest.mark.slow
@pytest.mark.parametrize("release", ["spin", "barrier"])  # "barrier": the old release, kept for comparisons
def test_the_allreduce_task_is_timed_with_every_librarys_release_skew(tmp_path: Path, release: str) -> None:
    """About 30 s each on a loaded 2-core machine: three rank groups importing torch."""
    from orchestrator.translation.scoring import run_judge
    job = _allreduce_job(tmp_path, ALLREDUCE, mode="full", trials=2, stress=2,
                         timing={"iters": 10, "warmup": 1, "input_sets": 2, "release": release})
    result = run_judge(job, timeout_s=600, module="orchestrator.translation.multijudge")
    assert result["failure_class"] is None, result["failure_detail"]
    timing = result["stages"]["timing"]
    assert timing["status"] == "passed" and timing["candidate"]["n"] == 10 and timing["baseline"]["n"] == 10
    # sized in each side's first round, then one count for both sides (the same on every rank, or
    # the run would have hung)
    cand_calls, ref_calls = timing["candidate"]["calls_per_region"], timing["reference"]["calls_per_region"]
    assert cand_calls[1:] == ref_calls[1:] and len(set(cand_calls[1:])) == 1
    assert cand_calls[1] == max(cand_calls[0], ref_calls[0])
    skews = timing["release_skew_us"]
    assert set(skews) == {"candidate", "h100", "a100"}
    for role, s in skews.items():
        assert 0 <= s["median"] <= s["p90"] <= s["max"], role
        assert s["median"] < 50_000, f"{role}: ranks released {s['median']:.0f} us apart"  # generous: a loaded CI host


def test_a_rank_region_holds_the_judges_count_of_calls_on_fresh_copies() -> None:
    """The rank worker's timed loop: `calls_per_region` calls per released region, each on
    its own fresh copy of the next input set, and a sample is the region's time over them."""
    import torch

    from orchestrator.translation import rankworker

    slots = (ctypes.c_int64 * 2)()
    seen: list[tuple[int, float]] = []

    def call(x: Any) -> Any:
        seen.append((x.data_ptr(), float(x[0])))
        time.sleep(0.002)
        return x + 1

    sets = [(torch.full((4,), float(k)),) for k in range(3)]
    result = rankworker._time({"op": "time", "input_sets": sets, "iters": 5, "warmup": 1, "calls_per_region": 4},
                              call, None, 30.0, False, "cpu", SpinRelease(slots, 0, 1), {})
    assert result["calls_per_region"] == 4 and len(result["times_ms"]) == len(result["release_ns"]) == 5
    timed = seen[1:]  # after the warm-up call
    assert len(timed) == 5 * 4
    assert [v for _, v in timed] == [float(i % 3) for i in range(20)]  # the sets in rotation
    assert all(original.data_ptr() not in {p for p, _ in timed} for (original,) in sets)  # copies, not the sets
    assert all(2.0 <= t < 50.0 for t in result["times_ms"])  # per call, not per region (8 ms)


# rank 1's output wrong at its 6th call only: after 3 fresh trials, the third call of the first loaded trial
ALLREDUCE_WRONG_AT_SIXTH_CALL = ALLREDUCE.replace(
    "  __atomic_store_n(&me[1], gen, __ATOMIC_RELEASE);",
    "  static int calls = 0;\n  if (++calls == 6 && rank == 1) ((uint16_t*)output)[0] ^= 0x4000;\n"
    "  __atomic_store_n(&me[1], gen, __ATOMIC_RELEASE);")


def test_loaded_trials_in_the_multi_judge_check_each_call_on_every_rank(tmp_path: Path) -> None:
    """The multi-GPU judge runs loaded trials as the single ones do (gpuload.GpuLoads: a load on
    each rank's device, one on a CPU), four calls each, every rank's output checked at every call:
    rank 1 wrong at its 6th call fails, named by call and rank; with one call per loaded trial,
    as before, it passes."""
    from orchestrator.translation.scoring import run_judge
    job = _allreduce_job(tmp_path, ALLREDUCE_WRONG_AT_SIXTH_CALL, mode="check", trials=3, stress=0, loaded_trials=2)
    result = run_judge(job, timeout_s=600, module="orchestrator.translation.multijudge")
    assert result["failure_class"] == "incorrect", result["failure_detail"]
    assert result["failure_detail"].startswith("loaded trial at shape ")
    assert "call 3 of 4: rank 1 of 2: " in result["failure_detail"]
    failed = result["stages"]["correctness"]["trials"][-1]
    assert failed["kind"] == "loaded" and failed["calls"] == 4 and failed["load_iterations"] >= 0
    passed = run_judge({**job, "loaded_calls": 1, "log_dir": str(tmp_path / "logs1")}, timeout_s=600,
                       module="orchestrator.translation.multijudge")
    assert passed["failure_class"] is None, passed["failure_detail"]
    assert [t["kind"] for t in passed["stages"]["correctness"]["trials"]] == ["fresh"] * 6 + ["loaded"] * 4
