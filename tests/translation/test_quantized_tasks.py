"""The quantized-GEMM translation tasks (tr-marlin-gptq-w4a16-gemm, tr-marlin-awq-w4a16-zp-gemm,
tr-vllm-allspark-w8a16-gemm): what their kernels read against what their references compute.

The kernels get raw pointers (task.py `launch`: `data_ptr()`) and read the buffers as entry.h
lays them out, dense and row-major. So the check here dequantizes from the raw bytes of each
input's storage with NumPy, independently of task.py's own unpacking, and compares with the
reference. A view whose memory is not row-major (the AWQ zero points were a transposed view
until 2026-11-30: both kernels read unrelated zero points on the H200, rel-norm error 0.993)
fails it, as would a wrong nibble order, group axis or bias.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy
import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.problem import import_file
from orchestrator.translation import builds
from orchestrator.translation.catalog import find_task
from orchestrator.translation.scoring import run_judge

TRANSLATION = REPO_ROOT / "translation"
GPTQ, AWQ, ALLSPARK = "tr-marlin-gptq-w4a16-gemm", "tr-marlin-awq-w4a16-zp-gemm", "tr-vllm-allspark-w8a16-gemm"
TASKS = (GPTQ, AWQ, ALLSPARK)
GROUP = 128


def _glue(task_id: str):
    task = find_task(task_id, TRANSLATION)
    return import_file(task.file("task.py"), f"test_quantized_{task_id.replace('-', '_')}")


def _raw(t: torch.Tensor, dtype: type, shape: tuple[int, ...]) -> numpy.ndarray:
    """What a kernel given t.data_ptr() reads: the storage's bytes from the tensor's offset,
    taken as a dense row-major array of `shape` (strides are ignored, as in C)."""
    count = int(numpy.prod(shape))
    storage = numpy.frombuffer(bytes(t.untyped_storage()), dtype=numpy.uint8)
    start = t.storage_offset() * t.element_size()
    return storage[start:start + count * numpy.dtype(dtype).itemsize].view(dtype).reshape(shape)


def _nibbles_along_rows(words: numpy.ndarray) -> numpy.ndarray:
    """[R, C] uint32, value (8r + t, c) in bits 4t..4t+3 of words[r, c] -> [8R, C]."""
    r, c = words.shape
    out = numpy.empty((8 * r, c), dtype=numpy.int64)
    for row in range(8 * r):
        out[row] = (words[row // 8].astype(numpy.int64) >> (4 * (row % 8))) & 0xF
    return out


def _nibbles_along_cols(words: numpy.ndarray) -> numpy.ndarray:
    """[R, C] uint32, value (r, 8c + t) in bits 4t..4t+3 of words[r, c] -> [R, 8C]."""
    r, c = words.shape
    out = numpy.empty((r, 8 * c), dtype=numpy.int64)
    for col in range(8 * c):
        out[:, col] = (words[:, col // 8].astype(numpy.int64) >> (4 * (col % 8))) & 0xF
    return out


def _raw_weight(task_id: str, inputs: tuple[torch.Tensor, ...], m: int, n: int, k: int) -> numpy.ndarray:
    """The fp64 [K, N] weight entry.h defines, from the raw buffers."""
    if task_id == ALLSPARK:
        q = _raw(inputs[1], numpy.uint8, (k, n)).astype(numpy.float64)
        scales = _raw(inputs[2], numpy.float16, (n,)).astype(numpy.float64)
        return (q - 128.0) * scales[None, :]
    q = _nibbles_along_rows(_raw(inputs[1], numpy.uint32, (k // 8, n)))
    scales = _raw(inputs[2], numpy.float16, (k // GROUP, n)).astype(numpy.float64)
    if task_id == GPTQ:
        zeros = numpy.full((k // GROUP, n), 8, dtype=numpy.int64)
    else:
        zeros = _nibbles_along_cols(_raw(inputs[3], numpy.uint32, (k // GROUP, n // 8)))
    rows = numpy.arange(k) // GROUP
    return (q - zeros[rows]).astype(numpy.float64) * scales[rows]


@pytest.mark.parametrize("task_id", TASKS)
def test_inputs_are_dense_row_major(task_id: str) -> None:
    glue = _glue(task_id)
    inputs = glue.get_inputs({"m": 5, "n": 512, "k": 384}, torch.Generator().manual_seed(11), "cpu")
    for i, t in enumerate(inputs):
        assert t.is_contiguous(), f"input {i} of {task_id} is a view with strides {t.stride()}: not what entry.h lays out"


@pytest.mark.parametrize("task_id", TASKS)
@pytest.mark.parametrize("shape", [{"m": 3, "n": 256, "k": 256}, {"m": 2, "n": 512, "k": 640}])
def test_reference_equals_a_dequantizer_of_the_raw_buffers(task_id: str, shape: dict) -> None:
    glue = _glue(task_id)
    m, n, k = shape["m"], shape["n"], shape["k"]
    inputs = glue.get_inputs(shape, torch.Generator().manual_seed(m * n + k), "cpu")
    a = _raw(inputs[0], numpy.float16, (m, k)).astype(numpy.float64)
    want = a @ _raw_weight(task_id, inputs, m, n, k)
    got = glue.reference(inputs).double().numpy()
    assert got.shape == (m, n)
    # the reference rounds once to fp16 (2**-11 relative) and outputs are ~1
    assert numpy.abs(got - want).max() <= 2**-10 * (1 + numpy.abs(want).max())
    assert numpy.abs(want).mean() > 0.2  # not a vacuous comparison of near-zero outputs


def test_the_check_rejects_zero_points_laid_out_transposed() -> None:
    """The H200 failure of 2026-11-30 on the CPU: zero points handed over as a transposed
    view (what pack_nibbles(z, 1) returned) read as entry.h says give an unrelated output."""
    glue = _glue(AWQ)
    m, n, k = 4, 512, 1024
    a, q, s, z, c = glue.get_inputs({"m": m, "n": n, "k": k}, torch.Generator().manual_seed(3), "cpu")
    transposed = z.t().contiguous().t()  # same values, memory [N/8, K/128]
    assert torch.equal(transposed, z) and not transposed.is_contiguous()
    seen = (a, q, s, transposed, c)
    want = glue.reference(seen).double().numpy()
    kernel_view = _raw(a, numpy.float16, (m, k)).astype(numpy.float64) @ _raw_weight(AWQ, seen, m, n, k)
    rel = numpy.linalg.norm(kernel_view - want) / numpy.linalg.norm(want)
    assert rel > 0.5


# One-time weight preparation (entry.h: popcorn_*_prepare, untimed; task.py `prepare`, run by
# the library's process once per input set). Host stand-ins that honour entry.h go through the
# real judge on a CPU: prepare lays the weights out its own way (transposed, scales and zero
# points unpacked) in `packed`, and the GEMM reads A and `packed` alone.
STANDIN_COMMON = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef _Float16 half;
"""
STANDINS = {
    ALLSPARK: STANDIN_COMMON + r"""
int popcorn_w8a16_prepare(int n, int k, const uint8_t* Q, const void* scales, void* packed, void* stream) {
  uint8_t* w = (uint8_t*)packed;  /* [n][k]: each column's weights contiguous */
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < n; ++j) w[(size_t)j * k + p] = Q[(size_t)p * n + j];
  memcpy(w + (size_t)n * k, scales, 2 * (size_t)n);
  return 0;
}
int popcorn_w8a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C, void* stream) {
  const half* a = (const half*)A;
  const uint8_t* w = (const uint8_t*)packed;
  const half* s = (const half*)(w + (size_t)n * k);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p) acc += (float)a[i * k + p] * ((float)w[(size_t)j * k + p] - 128.f);
      ((half*)C)[i * n + j] = (half)(acc * (float)s[j]);
    }
  return 0;
}
""",
    GPTQ: STANDIN_COMMON + r"""
static uint32_t nibble(uint32_t word, int t) { return (word >> (4 * t)) & 15u; }
int popcorn_w4a16_prepare(int n, int k, const uint32_t* Q, const void* scales, void* packed, void* stream) {
  uint8_t* w = (uint8_t*)packed;  /* [n][k/2]: each column's nibbles contiguous, then the scales */
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; p += 2)
      w[(size_t)j * (k / 2) + p / 2] = (uint8_t)(nibble(Q[(size_t)(p / 8) * n + j], p % 8) |
                                                 nibble(Q[(size_t)(p / 8) * n + j], p % 8 + 1) << 4);
  memcpy(w + (size_t)n * k / 2, scales, 2 * (size_t)(k / 128) * n);
  return 0;
}
int popcorn_w4a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C, void* stream) {
  const half* a = (const half*)A;
  const uint8_t* w = (const uint8_t*)packed;
  const half* s = (const half*)(w + (size_t)n * k / 2);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p) {
        int q = (w[(size_t)j * (k / 2) + p / 2] >> (4 * (p % 2))) & 15;
        acc += (float)a[i * k + p] * (float)(q - 8) * (float)s[(p / 128) * n + j];
      }
      ((half*)C)[i * n + j] = (half)acc;
    }
  return 0;
}
""",
    AWQ: STANDIN_COMMON + r"""
static uint32_t nibble(uint32_t word, int t) { return (word >> (4 * t)) & 15u; }
int popcorn_w4a16_zp_prepare(int n, int k, const uint32_t* Q, const void* scales, const uint32_t* zeros, void* packed,
                             void* stream) {
  /* [n][k/2] nibbles of q, then the scales, then the zero points one byte each ([k/128][n]) */
  uint8_t* w = (uint8_t*)packed;
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; p += 2)
      w[(size_t)j * (k / 2) + p / 2] = (uint8_t)(nibble(Q[(size_t)(p / 8) * n + j], p % 8) |
                                                 nibble(Q[(size_t)(p / 8) * n + j], p % 8 + 1) << 4);
  size_t scale_bytes = 2 * (size_t)(k / 128) * n;
  memcpy(w + (size_t)n * k / 2, scales, scale_bytes);
  uint8_t* z = w + (size_t)n * k / 2 + scale_bytes;
  for (int g = 0; g < k / 128; ++g)
    for (int j = 0; j < n; ++j) z[(size_t)g * n + j] = (uint8_t)nibble(zeros[(size_t)g * (n / 8) + j / 8], j % 8);
  return 0;
}
int popcorn_w4a16_zp_gemm(int m, int n, int k, const void* A, const void* packed, void* C, void* stream) {
  const half* a = (const half*)A;
  const uint8_t* w = (const uint8_t*)packed;
  const half* s = (const half*)(w + (size_t)n * k / 2);
  const uint8_t* z = w + (size_t)n * k / 2 + 2 * (size_t)(k / 128) * n;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p) {
        int q = (w[(size_t)j * (k / 2) + p / 2] >> (4 * (p % 2))) & 15;
        acc += (float)a[i * k + p] * (float)(q - z[(p / 128) * n + j]) * (float)s[(p / 128) * n + j];
      }
      ((half*)C)[i * n + j] = (half)acc;
    }
  return 0;
}
""",
}


def _standin(tmp_path: Path, name: str, code: str) -> str:
    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(code)
    subprocess.run([shutil.which("gcc") or "cc", "-shared", "-fPIC", "-O2", str(src), "-o", str(lib)], check=True)
    return str(lib)


def _judge_standins(tmp_path: Path, task_id: str, candidate_code: str, mode: str) -> dict:
    task = find_task(task_id, TRANSLATION)
    reference = _standin(tmp_path, "reference", STANDINS[task_id])
    job = {"task_dir": str(task.path), "symbol": task.manifest["entry"]["symbol"], "device": "cpu", "mode": mode,
           "seed": 5, "libraries": {"candidate": _standin(tmp_path, "candidate", candidate_code), "h100": reference,
                                    "a100": reference},
           "trials": 2, "stress": 1, "timing": {"iters": 3, "warmup": 1, "input_sets": 2}, "trial_timeout_s": 120}
    return run_judge(job, timeout_s=600)


def test_prepared_weights_pass_every_stage_with_the_prepare_untimed(tmp_path: Path) -> None:
    slow_prepare = STANDINS[ALLSPARK].replace("  return 0;\n}\nint popcorn_w8a16_gemm(",
                                              "  usleep(200000);\n  return 0;\n}\nint popcorn_w8a16_gemm(")
    assert slow_prepare != STANDINS[ALLSPARK]
    result = _judge_standins(tmp_path, ALLSPARK, "#include <unistd.h>\n" + slow_prepare, "full")
    assert result["failure_class"] is None, result["failure_detail"]
    assert all(t["passed"] for t in result["stages"]["correctness"]["trials"])
    timing = result["stages"]["timing"]
    assert timing["candidate"]["n"] >= 3 and timing["baseline"]["n"] == timing["reference"]["n"]
    assert timing["candidate"]["max_ms"] < 100  # the 200 ms prepare is outside every timed call


@pytest.mark.parametrize("task_id", [GPTQ, AWQ])
def test_marlin_tasks_prepare_and_launch_pass_what_entry_h_declares(tmp_path: Path, task_id: str) -> None:
    result = _judge_standins(tmp_path, task_id, STANDINS[task_id], "check")
    assert result["failure_class"] is None, result["failure_detail"]
    assert [t["passed"] for t in result["stages"]["correctness"]["trials"]] == [True, True]


def test_a_prepare_that_writes_into_the_weights_is_caught(tmp_path: Path) -> None:
    tampering = STANDINS[ALLSPARK].replace("  memcpy(w + (size_t)n * k, scales, 2 * (size_t)n);",
                                           "  memcpy(w + (size_t)n * k, scales, 2 * (size_t)n);\n  ((uint8_t*)Q)[0] ^= 1;")
    assert tampering != STANDINS[ALLSPARK]
    result = _judge_standins(tmp_path, ALLSPARK, tampering, "check")
    assert result["failure_class"] == "hack_detected" and "input_mutation" in result["failure_detail"]


def test_a_library_without_the_prepare_function_fails_clearly(tmp_path: Path) -> None:
    gemm_only = STANDINS[ALLSPARK].replace("int popcorn_w8a16_prepare(", "int popcorn_w8a16_prepare_misnamed(")
    result = _judge_standins(tmp_path, ALLSPARK, gemm_only, "check")
    assert result["failure_class"] == "runtime_error" and "popcorn_w8a16_prepare" in result["failure_detail"]


def test_packed_bytes_and_prepare_argtypes_agree_with_entry_h(tmp_path: Path) -> None:
    """entry.h's popcorn_*_packed_bytes (compiled, the three headers in one program) against
    task.py's, and each prepare declaration's parameters against PREPARE_ARGTYPES."""
    shapes = ((256, 128), (512, 640), (28672, 14336))
    program, expected = ["#include <cstdio>"], []
    for task_id in TASKS:
        task, glue = find_task(task_id, TRANSLATION), _glue(task_id)
        header = task.file("entry.h").read_text()
        declaration = header[header.index(f"int {glue.PREPARE_SYMBOL}("):]
        params = declaration[declaration.index("(") + 1:declaration.index(")")].split(",")
        assert [ctypes.c_void_p if "*" in p or "cudaStream_t" in p else ctypes.c_int for p in params] == \
            glue.PREPARE_ARGTYPES, task_id
        program.append(f'#include "{task.file("entry.h")}"')
        expected += [glue.packed_bytes(n, k) for n, k in shapes]
    calls = [f'  std::printf("%zu\\n", {glue_symbol}({n}, {k}));'
             for glue_symbol in (_glue(t).PREPARE_SYMBOL.replace("_prepare", "_packed_bytes") for t in TASKS)
             for n, k in shapes]
    source = tmp_path / "packed_bytes.cu"
    source.write_text("\n".join(program + ["int main() {", *calls, "  return 0;", "}", ""]))
    exe = tmp_path / "packed_bytes"
    subprocess.run([builds.nvcc_path(), "-std=c++17", str(source), "-o", str(exe)],
                   check=True, capture_output=True, text=True, timeout=300)
    printed = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert printed == expected
