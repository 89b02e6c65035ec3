"""PopcornBench glue for tr-marlin-awq-w4a16-zp-gemm: inputs, the entry-point call, the reference.

Storage (see entry.h): A [M, K] fp16 row-major; Q [K/8, N] int32 packed along K (nibble t of
Q[r, j] holds q(8r + t, j) in 0..15); scales [K/128, N] fp16; zeros [K/128, N/8] int32 packed
along N (nibble t of zeros[g, w] holds z(g, 8w + t) in 0..15); C [M, N] fp16 row-major, filled
with NaN. W = (q - z[k // 128]) * scales[k // 128]. `prepare` runs the library's
popcorn_w4a16_zp_prepare once per weight, untimed (vLLM converts at load time), into a buffer
of `packed_bytes` that the timed popcorn_w4a16_zp_gemm reads.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

GROUP = 128
OUTPUTS = (4,)  # C; the other inputs must stay unchanged
# popcorn_w4a16_zp_gemm(m, n, k, A, packed, C, stream)
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p]
PREPARE_SYMBOL = "popcorn_w4a16_zp_prepare"  # (n, k, Q, scales, zeros, packed, stream)
PREPARE_ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                    ctypes.c_void_p]


def pack_nibbles(values: torch.Tensor, dim: int) -> torch.Tensor:
    """Values in 0..15 -> int32 words of 8, packed along `dim` (element 8w + t in nibble t of word w)."""
    v = values.to(torch.int64).movedim(dim, 0)
    words = torch.zeros((v.shape[0] // 8, *v.shape[1:]), dtype=torch.int64)
    for t in range(8):
        words |= v[t::8] << (4 * t)
    # The uint32 bits as int32. contiguous(): the kernels read the buffer row-major (entry.h);
    # movedim alone leaves a view whose memory is the transpose (packed along N it was
    # [N/8, K/128] in memory, and both kernels read unrelated zero points).
    return (words - ((words >> 31) << 32)).to(torch.int32).movedim(0, dim).contiguous()


def unpack_nibbles(words: torch.Tensor, dim: int) -> torch.Tensor:
    """Inverse of pack_nibbles: int32 words -> int64 values in 0..15, 8 per word along `dim`."""
    w = words.to(torch.int64).movedim(dim, 0) & 0xFFFFFFFF
    nibbles = torch.stack([(w >> (4 * t)) & 0xF for t in range(8)], dim=1)  # [words, 8, ...]
    return nibbles.reshape(-1, *w.shape[1:]).movedim(0, dim)


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
    a = torch.randn(m, k, generator=generator)
    q = torch.randint(0, 16, (k, n), generator=generator)
    z = torch.randint(0, 16, (k // GROUP, n), generator=generator)
    # q - z (both uniform on 0..15) has standard deviation ~6.5: these scales bring the
    # outputs to ~1 at every K.
    scales = (torch.rand(k // GROUP, n, generator=generator) + 0.5) / (6.5 * math.sqrt(k))
    c = torch.full((m, n), float("nan"))
    return (a.half().to(device), pack_nibbles(q, 0).to(device), scales.half().to(device),
            pack_nibbles(z, 1).to(device), c.half().to(device))


def packed_bytes(n: int, k: int) -> int:
    """entry.h popcorn_w4a16_zp_packed_bytes: the bytes of Q and zeros plus twice those of
    scales, plus 1 KiB."""
    groups = k // GROUP
    return k * n // 2 + groups * (n // 2) + 2 * groups * n * 2 + 1024


def prepare(library: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> tuple[torch.Tensor, ...]:
    """Untimed, once per weight: the library's popcorn_w4a16_zp_prepare fills `packed`.
    Returns what `launch` takes: the inputs and `packed`."""
    a, qweight, scales, qzeros, c = inputs
    k, n = a.shape[1], qweight.shape[1]
    packed = torch.zeros(packed_bytes(n, k), dtype=torch.uint8, device=a.device)
    fn = getattr(library, PREPARE_SYMBOL)
    fn.argtypes, fn.restype = PREPARE_ARGTYPES, ctypes.c_int
    rc = fn(n, k, qweight.data_ptr(), scales.data_ptr(), qzeros.data_ptr(), packed.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"{PREPARE_SYMBOL} returned cudaError {rc}")
    return (*inputs, packed)


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, qweight, scales, qzeros, c, packed = inputs
    m, k = a.shape
    n = qweight.shape[1]
    rc = entry(m, n, k, a.data_ptr(), packed.data_ptr(), c.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_w4a16_zp_gemm returned cudaError {rc}")
    return c


def dequantize(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    """W [K, N] in fp64: (q - the group's zero point) * the group's scale."""
    q = unpack_nibbles(qweight, 0).double()
    z = unpack_nibbles(qzeros, 1).double().repeat_interleave(GROUP, dim=0)
    return (q - z) * scales.double().repeat_interleave(GROUP, dim=0)


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    a, qweight, scales, qzeros, c = inputs
    return (a.double() @ dequantize(qweight, scales, qzeros)).to(c.dtype)
