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

import numpy
import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.problem import import_file
from orchestrator.translation.catalog import find_task

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
