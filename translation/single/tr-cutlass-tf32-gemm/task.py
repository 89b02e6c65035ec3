"""PopcornBench glue for tr-cutlass-tf32-gemm: inputs, the entry-point call, the reference.

Storage: A [M, K] row-major; B column-major [K, N] held as Bt [N, K]; C and D
column-major [M, N] held as Ct, Dt [N, M] (contiguous, so Dt[j, i] = D[i, j]).
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

ALPHA, BETA = 1.0, 0.5
OUTPUTS = (3,)  # indices of inputs the kernel writes (D); the others must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


def get_inputs(shape: dict[str, int], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["m"], shape["n"], shape["k"]
    a = torch.rand(m, k, generator=generator) * 2 - 1
    bt = (torch.rand(n, k, generator=generator) * 2 - 1) / math.sqrt(k)  # |D| ~ 1/3 at every K
    ct = torch.rand(n, m, generator=generator) * 2 - 1
    dt = torch.full((n, m), float("nan"))  # output buffer: unwritten elements fail the check
    return tuple(t.to(device) for t in (a, bt, ct, dt))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, bt, ct, dt = inputs
    m, k = a.shape
    n = bt.shape[0]
    rc = entry(m, n, k, ALPHA, a.data_ptr(), bt.data_ptr(), BETA, ct.data_ptr(), dt.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_tf32_gemm returned cudaError {rc}")
    return dt


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    a, bt, ct, _ = inputs
    # Dt = (alpha A B + beta C)^T = alpha Bt A^T + beta Ct, in fp64.
    return (ALPHA * (bt.double() @ a.double().T) + BETA * ct.double()).to(torch.float32)
