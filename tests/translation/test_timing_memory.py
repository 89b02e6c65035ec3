"""On a GPU: a candidate library whose processes take the GPU's memory after its correctness
trials, so that the reference runs out during the timing set-up, fails (runtime_error), as in a
trial (tests/test_judge_gpu_lock.py); before, the timing's out of memory was the judge's
infra_error, which no rate counts.

tr-cutlass-tf32-gemm at a small shape, with a plain CUDA kernel as the candidate and the
H100 reference, built here by nvcc. The task's reference takes 45 % of the GPU at every call
(and hands it back), as `validate --device cuda` allows a reference."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.translation.catalog import find_task
from orchestrator.translation.scoring import run_judge

pytestmark = pytest.mark.gpu

GEMM = r"""
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__global__ void naive_gemm(int m, int n, int k, float alpha, const float* A, const float* B, float beta,
                           const float* C, float* D) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
  if (i >= m) return;
  float acc = 0.f;
  for (int p = 0; p < k; ++p) acc += A[i * k + p] * B[p + j * k];
  D[i + j * m] = alpha * acc + beta * C[i + j * m];
}

extern "C" int popcorn_tf32_gemm(int m, int n, int k, float alpha, const float* A, const float* B, float beta,
                                 const float* C, float* D, void* stream) {
  naive_gemm<<<dim3((m + 127) / 128, n), 128, 0, (cudaStream_t)stream>>>(m, n, k, alpha, A, B, beta, C, D);
  return (int)cudaGetLastError();
}
"""
# The first process of the library leaves a mark; every later one (the timing's) takes 60 % of
# the GPU as it loads and keeps it.
HOG_AFTER_THE_FIRST_PROCESS = GEMM + r"""
static void* held;
__attribute__((constructor)) static void take_the_gpu_after_the_first_process(void) {
  const char* mark = getenv("HOG_MARK");
  if (!mark) return;
  if (access(mark, F_OK) != 0) { FILE* f = fopen(mark, "w"); if (f) fclose(f); return; }
  size_t free_b, total;
  cudaMemGetInfo(&free_b, &total);
  if (cudaMalloc(&held, (size_t)(0.6 * total)) == cudaSuccess) cudaMemset(held, 1, (size_t)(0.6 * total));
}
"""
NEEDS_45_PERCENT = (
    "def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:\n"
    "    if inputs[0].is_cuda:\n"
    "        total = torch.cuda.get_device_properties(inputs[0].device).total_memory\n"
    "        need = torch.ones(int(0.45 * total), dtype=torch.uint8, device=inputs[0].device)\n"
    "        del need\n"
    "        torch.cuda.empty_cache()\n")


def _library(tmp_path: Path, name: str, code: str) -> str:
    src, lib = tmp_path / f"{name}.cu", tmp_path / f"{name}.so"
    src.write_text(code)
    subprocess.run([shutil.which("nvcc") or "nvcc", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-O2",
                    str(src), "-o", str(lib)], check=True)
    return str(lib)


def _task_needing_45_percent(tmp_path: Path) -> Path:
    task_dir = tmp_path / "task"
    shutil.copytree(find_task("tr-cutlass-tf32-gemm", REPO_ROOT / "translation").path, task_dir)
    glue = task_dir / "task.py"
    head = "def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:\n"
    assert head in glue.read_text()
    glue.write_text(glue.read_text().replace(head, NEEDS_45_PERCENT, 1))
    manifest = json.loads((task_dir / "manifest.json").read_text())
    for dim in ("m", "n", "k"):
        manifest["shapes"][dim]["default"] = 1024
    (task_dir / "manifest.json").write_text(json.dumps(manifest))
    return task_dir


def test_a_candidate_holding_the_gpu_when_the_timing_reference_runs_out_fails(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOG_MARK", str(tmp_path / "first-process-was-here"))
    reference = _library(tmp_path, "reference", GEMM)
    job = {"task_dir": str(_task_needing_45_percent(tmp_path)), "symbol": "popcorn_tf32_gemm", "device": "cuda:0",
           "mode": "full", "seed": 5, "trials": 1, "stress": 0, "loaded_trials": 0, "trial_timeout_s": 120,
           "libraries": {"candidate": _library(tmp_path, "candidate", HOG_AFTER_THE_FIRST_PROCESS),
                         "h100": reference, "a100": reference},
           "timing": {"iters": 5, "warmup": 1, "input_sets": 2}}
    result = run_judge(job, timeout_s=600)
    assert result["stages"]["correctness"]["status"] == "passed", result["failure_detail"][-1500:]
    assert result["failure_class"] == "runtime_error", result["failure_detail"][-1500:]
    assert "out_of_memory: the reference ran out of GPU memory while the submission's process held" \
        in result["failure_detail"]
