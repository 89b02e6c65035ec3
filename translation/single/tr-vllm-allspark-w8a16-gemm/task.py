"""PopcornBench glue for tr-vllm-allspark-w8a16-gemm: inputs, the entry-point call, the reference.

Storage (see entry.h): A [M, K] fp16 row-major, uniform in [-1, 1]; Q [K, N] uint8
row-major, uniform over 0..255; scales [N] fp16, one per output channel, chosen so that
outputs are ~1 at every K; C [M, N] fp16 row-major, filled with NaN. The weight is
(Q - 128) * scales (vLLM's uint8b128, no zero points). `prepare` runs the library's
popcorn_w8a16_prepare once per weight, untimed (vLLM repacks at load time), into a buffer of
`packed_bytes` that the timed popcorn_w8a16_gemm reads.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

OUTPUTS = (3,)  # C; the other inputs must stay unchanged
# popcorn_w8a16_gemm(m, n, k, A, packed, C, stream)
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p]
PREPARE_SYMBOL = "popcorn_w8a16_prepare"  # (n, k, Q, scales, packed, stream)
PREPARE_ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
BIAS = 128  # uint8b128: stored value q means q - 128


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
    a = torch.rand(m, k, generator=generator) * 2 - 1
    q = torch.randint(0, 256, (k, n), generator=generator, dtype=torch.uint8)
    # |q - 128| ~ 74 and |a| ~ 0.58: these scales bring outputs to ~1 at every K.
    scales = (torch.rand(n, generator=generator) + 0.5) / (64 * math.sqrt(k))
    c = torch.full((m, n), float("nan"))
    return (a.to(torch.float16).to(device), q.to(device), scales.to(torch.float16).to(device),
            c.to(torch.float16).to(device))


def packed_bytes(n: int, k: int) -> int:
    """entry.h popcorn_w8a16_packed_bytes: the bytes of Q plus twice those of scales, plus 1 KiB."""
    return k * n + 2 * n * 2 + 1024


def prepare(library: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> tuple[torch.Tensor, ...]:
    """Untimed, once per weight: the library's popcorn_w8a16_prepare fills `packed`.
    Returns what `launch` takes: the inputs and `packed`."""
    a, q, scales, c = inputs
    k, n = q.shape
    packed = torch.zeros(packed_bytes(n, k), dtype=torch.uint8, device=a.device)
    fn = getattr(library, PREPARE_SYMBOL)
    fn.argtypes, fn.restype = PREPARE_ARGTYPES, ctypes.c_int
    rc = fn(n, k, q.data_ptr(), scales.data_ptr(), packed.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"{PREPARE_SYMBOL} returned cudaError {rc}")
    return (*inputs, packed)


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, q, scales, c, packed = inputs
    (m, k), n = a.shape, q.shape[1]
    rc = entry(m, n, k, a.data_ptr(), packed.data_ptr(), c.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_w8a16_gemm returned cudaError {rc}")
    return c


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    a, q, scales, c = inputs
    weight = (q.double() - BIAS) * scales.double()[None, :]
    return (a.double() @ weight).to(c.dtype)
