"""The multi-GPU judge end to end on a CPU: ranks as processes, peer buffers in shared memory.

A host-compiled stand-in all-reduce (each rank copies its input into its shared buffer,
waits for every peer through flags in the peers' shared flag buffers, sums all peers'
buffers, waits again) runs through the same flow a GPU run takes: one process per
rank, buffer handles exchanged through the judge, a barrier before every call, every
rank's output compared with the reference, the slowest rank timed. world_size 3 shows
that nothing assumes a power of two.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.translation.scoring import run_judge

TASK_PY = '''
import ctypes
import torch
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
OUTPUTS = (1,)
SHARED = {"buffer": lambda shape, world_size: 4 * shape["numel"], "flags": lambda shape, world_size: 4096}

def get_inputs(shape, generator, device, rank, world_size):
    x = torch.rand(shape["numel"], generator=generator) * 2 - 1
    return (x.to(device), torch.full_like(x, float("nan")).to(device))

def launch(entry, inputs, peers, rank, world_size, stream):
    x, out = inputs
    rc = entry(rank, world_size, peers["buffer"], peers["flags"], x.data_ptr(), out.data_ptr(), x.numel(), 0, stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_allreduce returned {rc}")
    return out

def reference(all_inputs, rank):
    return sum(inputs[0].double() for inputs in all_inputs).float()
'''

ALLREDUCE = r"""
#include <sched.h>
#include <stdint.h>
#include <string.h>
static void wait_all(void* const* flags, int ws, int slot, uint32_t gen) {
  for (int j = 0; j < ws; j++) {
    uint32_t* f = (uint32_t*)flags[j];
    while (__atomic_load_n(&f[slot], __ATOMIC_ACQUIRE) < gen) sched_yield();
  }
}
int popcorn_allreduce(int rank, int ws, void* const* bufs, void* const* flags, const void* input, void* output,
                      size_t n, int bf16, void* stream) {
  uint32_t* me = (uint32_t*)flags[rank];
  uint32_t gen = ++me[32];
  memcpy(bufs[rank], input, n * 4);
  __atomic_store_n(&me[0], gen, __ATOMIC_RELEASE);
  wait_all(flags, ws, 0, gen);
  float* out = (float*)output;
  for (size_t i = 0; i < n; i++) {
    float s = 0.f;
    for (int j = 0; j < ws; j++) s += ((const float*)bufs[j])[i];
    out[i] = SCALE * s;
  }
  __atomic_store_n(&me[1], gen, __ATOMIC_RELEASE);
  wait_all(flags, ws, 1, gen);
  return 0;
}
"""
MANIFEST = {
    "id": "tr-test-allreduce", "track": "translation-multi",
    "shapes": {"numel": {"type": "int", "default": 4096, "cpu_default": 4096, "min": 16, "max": 65536, "multiple_of": 16}},
    "constraints": [], "tolerance": {"metric": "allclose", "atol": 1e-4, "rtol": 1e-4},
    "time_limits": {"build_s": 60, "trial_s": 20, "total_s": 300}, "world_size": {"default": 8, "min": 2, "max": 8},
}


def _library(tmp_path: Path, name: str, scale: str = "1.f", extra: str = "", prefix: str = "") -> str:
    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    body = ALLREDUCE.replace("  uint32_t* me =", extra + "  uint32_t* me =", 1)
    src.write_text(f"{prefix}#define SCALE ({scale})\n{body}")
    subprocess.run([shutil.which("gcc") or "cc", "-shared", "-fPIC", "-O2", str(src), "-o", str(lib)], check=True)
    return str(lib)


def _judge(tmp_path: Path, candidate: str, world_size: int = 3, mode: str = "full", timeout: float = 20,
           task_py: str = TASK_PY) -> dict:
    task = tmp_path / "task"
    task.mkdir(exist_ok=True)
    (task / "manifest.json").write_text(json.dumps(MANIFEST))
    (task / "task.py").write_text(task_py)
    reference = _library(tmp_path, "reference")
    job = {"task_dir": str(task), "symbol": "popcorn_allreduce", "world_size": world_size,
           "devices": ["cpu"] * world_size, "mode": mode, "seed": 5,
           "libraries": {"candidate": candidate, "h100": reference, "a100": reference},
           "trials": 2, "stress": 2, "timing": {"iters": 5, "warmup": 1, "input_sets": 2},
           "trial_timeout_s": timeout, "log_dir": str(tmp_path / "logs")}
    return run_judge(job, timeout_s=300, module="orchestrator.translation.multijudge")


def test_every_rank_is_checked_and_timed(tmp_path: Path) -> None:
    result = _judge(tmp_path, _library(tmp_path, "candidate"))
    assert result["failure_class"] is None, result["failure_detail"]
    trials = result["stages"]["correctness"]["trials"]
    assert sorted(t["shape"]["rank"] for t in trials) == [0, 0, 1, 1, 2, 2] and all(t["passed"] for t in trials)
    assert result["stages"]["stress"]["n"] == 2 and all(t["passed"] for t in result["stages"]["stress"]["trials"])
    timing = result["stages"]["timing"]
    assert timing["world_size"] == 3 and timing["candidate"]["n"] == 5 and timing["baseline"]["n"] == 5
    assert timing["speedup"] > 0
    assert all(result["stages"][name]["stage_wall_s"] > 0 for name in ("correctness", "stress", "timing"))


def test_a_wrong_sum_fails_on_its_rank(tmp_path: Path) -> None:
    result = _judge(tmp_path, _library(tmp_path, "half", scale="0.5f"), world_size=2, mode="check")
    assert result["failure_class"] == "incorrect" and "rank 0 of 2" in result["failure_detail"]


def _host_buffers() -> set[Path]:
    return set(Path("/dev/shm").glob("popcorn-*"))


def test_a_rank_that_crashes_is_a_runtime_error_not_a_hang(tmp_path: Path) -> None:
    """... and leaves no shared buffer behind in /dev/shm, though no rank closed its own."""
    before = _host_buffers()
    crash = _library(tmp_path, "crash", extra="  if (rank == 1) { volatile int* p = 0; *p = 1; }\n")
    result = _judge(tmp_path, crash, world_size=2, mode="check")
    assert result["failure_class"] == "runtime_error" and "rank 1 died" in result["failure_detail"]
    assert _host_buffers() <= before


def test_a_rank_that_never_arrives_times_out(tmp_path: Path) -> None:
    hang = _library(tmp_path, "hang", extra="  if (rank == 0) { for (;;) sched_yield(); }\n")
    result = _judge(tmp_path, hang, world_size=2, mode="check", timeout=5)
    assert result["failure_class"] == "timeout" and "did not finish within 5 s" in result["failure_detail"]


def test_the_multi_judge_runs_inside_a_local_sandbox(tmp_path: Path) -> None:
    from orchestrator.config import Settings
    from orchestrator.translation.builds import BuildResult
    from orchestrator.translation.catalog import Task
    from orchestrator.translation.scoring import _judge_in_sandbox

    task_dir = tmp_path / "task"
    task_dir.mkdir()
    (task_dir / "manifest.json").write_text(json.dumps(MANIFEST))
    (task_dir / "task.py").write_text(TASK_PY)
    reference = _library(tmp_path, "reference")
    libs = {side: BuildResult(side, True, Path(reference), "", 0.0, True, "k", []) for side in ("candidate", "h100")}
    job = {"symbol": "popcorn_allreduce", "device": "cpu", "world_size": 2, "mode": "check", "seed": 1,
           "trials": 1, "stress": 0, "timing": {}, "trial_timeout_s": 20}
    result = _judge_in_sandbox(Task(task_dir, {**MANIFEST, "nccl_env": {"NCCL_NVLS_ENABLE": "0"}}), libs, job,
                               Settings(device="cpu", sandbox="local"), 300, None,
                               "orchestrator.translation.multijudge", {})
    if result["failure_class"] == "infra_error" and result["failure_detail"].startswith("sandbox:"):
        pytest.skip(f"no local sandbox on this machine: {result['failure_detail']}")
    assert result["failure_class"] is None, result["failure_detail"]
    assert result["sandbox_backend"] == "local" and result["world_size"] == 2
    assert sorted(t["shape"]["rank"] for t in result["stages"]["correctness"]["trials"]) == [0, 1]


# The task's reference "runs out of GPU memory" while any candidate rank lives (on a CPU, what
# ranks holding the GPU's memory do to it): each candidate rank leaves its process id in a folder.
PUSHED_OUT_REFERENCE = TASK_PY.replace("def reference(all_inputs, rank):\n", (
    "def reference(all_inputs, rank):\n"
    "    import os\n"
    "    for name in os.listdir(os.environ['HOG_PID_DIR']):\n"
    "        try:\n"
    "            os.kill(int(name), 0)\n"
    "        except OSError:\n"
    "            continue\n"
    "        raise torch.OutOfMemoryError('CUDA out of memory (the candidate ranks hold the GPU)')\n"), 1)
LEAVES_ITS_PID = """#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void say_who_holds_the_gpu(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%d", getenv("HOG_PID_DIR"), (int)getpid());
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
}
"""


def test_a_reference_out_of_memory_beside_the_candidate_ranks_runs_with_them_stopped(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """As in the single-GPU judge (test_judge_cpu.py): not an infra error, which the report would
    drop. The candidate's ranks are stopped, every rank's reference computed, the ranks started
    again for the next trial; on a CPU nothing measures their memory, so they are not blamed."""
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("HOG_PID_DIR", str(pids))
    candidate = _library(tmp_path, "candidate", prefix=LEAVES_ITS_PID)
    result = _judge(tmp_path, candidate, world_size=2, mode="check", task_py=PUSHED_OUT_REFERENCE)
    assert result["failure_class"] is None, result["failure_detail"][-1500:]
    trials = result["stages"]["correctness"]["trials"]
    assert len(trials) == 4 and all(t["passed"] for t in trials)
    assert all("it ran with that process stopped" in t["candidate_restarted"] for t in trials)
    assert len(list(pids.iterdir())) == 2 * 3  # the ranks started once, then again after each of 2 trials

