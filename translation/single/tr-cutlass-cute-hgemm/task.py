"""PopcornBench glue for tr-cutlass-cute-hgemm: inputs, the entry-point call, the reference.

Storage: A [M, K] and B [N, K] row-major (K-major), C column-major, held as the
contiguous tensor Ct [N, M] (Ct[j, i] = C[i, j]). The kernel updates C in place.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

ALPHA, BETA = 1.0, -0.5
OUTPUTS = (2,)  # indices of inputs the kernel writes (C, in place); the others must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]


def get_inputs(shape: dict[str, int], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["m"], shape["n"], shape["k"]
    a = torch.rand(m, k, generator=generator) * 2 - 1
    # B scaled by 1/sqrt(K): |C| stays near 1/3 at every K, so one tolerance fits all shapes.
    b = (torch.rand(n, k, generator=generator) * 2 - 1) / math.sqrt(k)
    ct = torch.rand(n, m, generator=generator) * 2 - 1
    return tuple(t.to(torch.float16).to(device) for t in (a, b, ct))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, b, ct = inputs
    m, k = a.shape
    n = b.shape[0]
    rc = entry(m, n, k, ALPHA, a.data_ptr(), k, b.data_ptr(), k, BETA, ct.data_ptr(), m, stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_hgemm_tn returned cudaError {rc}")
    return ct


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    a, b, ct = inputs
    # Ct = (alpha A B^T + beta C)^T = alpha B A^T + beta Ct, in fp64, rounded to fp16 once.
    return (ALPHA * (b.double() @ a.double().T) + BETA * ct.double()).to(torch.float16)
