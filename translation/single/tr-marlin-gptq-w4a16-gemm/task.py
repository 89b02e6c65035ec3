"""PopcornBench glue for tr-marlin-gptq-w4a16-gemm: inputs, the entry-point call, the reference.

Storage (see entry.h): A [M, K] fp16 row-major; Q [K/8, N] int32 in GPTQ's checkpoint
layout (nibble t of Q[r, j] holds q(8r + t, j) in 0..15, the lowest nibble first); scales
[K/128, N] fp16; C [M, N] fp16 row-major, filled with NaN. W = (q - 8) * scales[k // 128].
`prepare` runs the library's popcorn_w4a16_prepare once per weight, untimed (vLLM repacks at
load time), into a buffer of `packed_bytes` that the timed popcorn_w4a16_gemm reads.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

GROUP = 128
OUTPUTS = (3,)  # C; the other inputs must stay unchanged
# popcorn_w4a16_gemm(m, n, k, A, packed, C, stream)
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p]
PREPARE_SYMBOL = "popcorn_w4a16_prepare"  # (n, k, Q, scales, packed, stream)
PREPARE_ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


def pack_gptq(q: torch.Tensor) -> torch.Tensor:
    """[K, N] values in 0..15 -> [K/8, N] int32, nibble t of row r holding q[8r + t] (GPTQ)."""
    k, n = q.shape
    words = torch.zeros(k // 8, n, dtype=torch.int64)
    for t in range(8):
        words |= q[t::8].to(torch.int64) << (4 * t)
    return (words - ((words >> 31) << 32)).to(torch.int32)  # the uint32 bit pattern as int32


def unpack_gptq(words: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_gptq: [K/8, N] int32 -> [K, N] int64 values in 0..15."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    nibbles = torch.stack([(w >> (4 * t)) & 0xF for t in range(8)], dim=1)  # [K/8, 8, N]
    return nibbles.reshape(-1, words.shape[1])


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
    a = torch.randn(m, k, generator=generator)
    q = torch.randint(0, 16, (k, n), generator=generator)
    # (q - 8) has standard deviation ~4.6: these scales bring the outputs to ~1 at every K.
    scales = (torch.rand(k // GROUP, n, generator=generator) + 0.5) / (4.6 * math.sqrt(k))
    c = torch.full((m, n), float("nan"))
    return (a.half().to(device), pack_gptq(q).to(device), scales.half().to(device), c.half().to(device))


def packed_bytes(n: int, k: int) -> int:
    """entry.h popcorn_w4a16_packed_bytes: the bytes of Q plus twice those of scales, plus 1 KiB."""
    return k * n // 2 + 2 * (k // GROUP) * n * 2 + 1024


def prepare(library: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> tuple[torch.Tensor, ...]:
    """Untimed, once per weight: the library's popcorn_w4a16_prepare fills `packed`.
    Returns what `launch` takes: the inputs and `packed`."""
    a, qweight, scales, c = inputs
    k, n = a.shape[1], qweight.shape[1]
    packed = torch.zeros(packed_bytes(n, k), dtype=torch.uint8, device=a.device)
    fn = getattr(library, PREPARE_SYMBOL)
    fn.argtypes, fn.restype = PREPARE_ARGTYPES, ctypes.c_int
    rc = fn(n, k, qweight.data_ptr(), scales.data_ptr(), packed.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"{PREPARE_SYMBOL} returned cudaError {rc}")
    return (*inputs, packed)


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, qweight, scales, c, packed = inputs
    m, k = a.shape
    n = qweight.shape[1]
    rc = entry(m, n, k, a.data_ptr(), packed.data_ptr(), c.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_w4a16_gemm returned cudaError {rc}")
    return c


def dequantize(qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """W [K, N] in fp64: (q - 8) * the scale of the row's group."""
    q = unpack_gptq(qweight).double() - 8.0
    return q * scales.double().repeat_interleave(GROUP, dim=0)


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    a, qweight, scales, c = inputs
    return (a.double() @ dequantize(qweight, scales)).to(c.dtype)
