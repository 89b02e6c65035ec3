"""PopcornBench glue for tr-vllm-w8a8-int8-gemm: inputs, the entry-point call, the reference.

Storage (see entry.h): A [M, K] int8 row-major; B column-major [K, N] held as Bt [N, K]
int8; a_scales [M] or [1] and b_scales [N] or [1] fp32; bias [N] or an empty tensor
(NULL), bf16; D [M, N] bf16 row-major, filled with NaN.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

OUTPUTS = (5,)  # D; the other inputs must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
EXACT_CHUNK = 512  # 512 * 128 * 128 < 2**24: fp32 partial sums of int8 products stay exact


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
    scales = shape.get("scales", "token_channel")
    a = torch.randint(-128, 128, (m, k), generator=generator, dtype=torch.int8)
    bt = torch.randint(-128, 128, (n, k), generator=generator, dtype=torch.int8)
    # |A B| ~ 74^2 sqrt(K); the scales bring outputs to ~1 at every K.
    sa = (torch.rand(m if scales.startswith("token") else 1, generator=generator) + 0.5) / 64
    sb = (torch.rand(n if scales.endswith("channel") else 1, generator=generator) + 0.5) / (64 * math.sqrt(k))
    bias = torch.rand(n, generator=generator) * 2 - 1 if shape.get("bias", "bias") == "bias" else torch.empty(0)
    d = torch.full((m, n), float("nan"))
    return (a.to(device), bt.to(device), sa.to(device), sb.to(device), bias.to(torch.bfloat16).to(device),
            d.to(torch.bfloat16).to(device))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, bt, sa, sb, bias, d = inputs
    m, k = a.shape
    n = bt.shape[0]
    rc = entry(m, n, k, a.data_ptr(), bt.data_ptr(), sa.data_ptr(), int(sa.numel() > 1),
               sb.data_ptr(), int(sb.numel() > 1), bias.data_ptr() if bias.numel() else None, d.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_w8a8_int8_gemm returned cudaError {rc}")
    return d


def exact_int8_matmul(a: torch.Tensor, bt: torch.Tensor, use_int_mm: bool | None = None) -> torch.Tensor:
    """A @ Bt^T of int8 matrices, exactly, as fp64. On a GPU: torch._int_mm (int32
    accumulation, exact: |sum| <= 128 * 128 * K < 2**31), which needs more than 16 rows (zero
    rows pad A). Elsewhere, or if _int_mm refuses the shape: fp32 GEMMs over K-chunks whose
    partial sums are integers below 2**24 (exact in fp32), summed in fp64."""
    if a.is_cuda if use_int_mm is None else use_int_mm:
        try:
            rows = a.shape[0]
            padded = torch.nn.functional.pad(a, (0, 0, 0, max(0, 17 - rows)))
            return torch._int_mm(padded, bt.t())[:rows].double()
        except RuntimeError:
            pass
    out = torch.zeros(a.shape[0], bt.shape[0], dtype=torch.float64, device=a.device)
    for lo in range(0, a.shape[1], EXACT_CHUNK):
        out += (a[:, lo:lo + EXACT_CHUNK].float() @ bt[:, lo:lo + EXACT_CHUNK].float().T).double()
    return out


def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    a, bt, sa, sb, bias, d = inputs
    out = exact_int8_matmul(a, bt) * sa.double()[:, None] * sb.double()[None, :]
    if bias.numel():
        out += bias.double()[None, :]
    return out.to(d.dtype)
