"""PopcornBench glue for tr-cutlass-grouped-gemm: inputs, the entry-point call, the reference.

Inputs (see entry.h): seg_indptr and weight_indices (int64), x [rows, d_in],
W [num_weights, d_out, d_in], y [rows, d_out] (zero), and a 64 MiB workspace.
Segment lengths are drawn in [0, seg_len_max], so empty segments occur.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

WORKSPACE_BYTES = 64 << 20
OUTPUTS = (4, 5)  # y and the workspace are written; the other inputs must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    segments, longest = int(shape["segments"]), int(shape["seg_len_max"])
    d_in, d_out = int(shape["d_in"]), int(shape["d_out"])
    dtype = DTYPES[shape.get("dtype", "bfloat16")]
    lengths = torch.randint(0, longest + 1, (segments,), generator=generator)
    if segments >= 3:
        lengths[int(torch.randint(0, segments, (1,), generator=generator))] = 0  # always one empty segment
    if int(lengths.sum()) == 0:
        lengths[-1] = longest
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    weight_indices = torch.randperm(segments, generator=generator)
    rows = int(indptr[-1])
    x = torch.rand(rows, d_in, generator=generator) * 2 - 1
    w = (torch.rand(segments, d_out, d_in, generator=generator) * 2 - 1) / math.sqrt(d_in)  # |y| ~ 1/3
    y = torch.zeros(rows, d_out)
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8)
    return (indptr.to(device), weight_indices.to(device), x.to(dtype).to(device), w.to(dtype).to(device),
            y.to(dtype).to(device), workspace.to(device))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    indptr, weight_indices, x, w, y, workspace = inputs
    rc = entry(weight_indices.numel(), indptr.data_ptr(), weight_indices.data_ptr(), x.shape[1], w.shape[1],
               x.data_ptr(), w.data_ptr(), y.data_ptr(), workspace.data_ptr(), workspace.numel(),
               int(x.dtype == torch.bfloat16), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_segment_gemm returned cudaError {rc}")
    return y


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    indptr, weight_indices, x, w, y, _ = inputs
    out = torch.zeros(y.shape, dtype=torch.float64, device=y.device)
    bounds = indptr.tolist()
    for i, wi in enumerate(weight_indices.tolist()):
        lo, hi = bounds[i], bounds[i + 1]
        if hi > lo:
            out[lo:hi] = x[lo:hi].double() @ w[wi].double().T
    return out.to(y.dtype)
