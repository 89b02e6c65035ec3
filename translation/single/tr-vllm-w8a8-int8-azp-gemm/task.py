"""PopcornBench glue for tr-vllm-w8a8-int8-azp-gemm: inputs, the entry-point call, the reference.

Storage (see entry.h): A [M, K] int8 row-major; B column-major [K, N] held as Bt [N, K]
int8; a_scales [M], b_scales [N] fp32; azp_adj [N] int32 (= J B); azp [M] int32 (per
token); bias [N] bf16 or empty (NULL); D [M, N] bf16 row-major, filled with NaN.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

OUTPUTS = (7,)  # D; the other inputs must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
EXACT_CHUNK = 512  # 512 * 128 * 128 < 2**24: fp32 partial sums of int8 products stay exact
AZP_RANGE = 64     # zero points in [-64, 64): |azp * azp_adj| stays far inside int32


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
    a = torch.randint(-128, 128, (m, k), generator=generator, dtype=torch.int8)
    bt = torch.randint(-128, 128, (n, k), generator=generator, dtype=torch.int8)
    colsum = bt.to(torch.int32).sum(dim=1, dtype=torch.int32)  # J @ B, exact in int32 (|.| <= 128 K)
    azp = torch.randint(-AZP_RANGE, AZP_RANGE, (m,), generator=generator, dtype=torch.int32)
    azp_adj = colsum
    # |(A - azp) B| ~ 80^2 sqrt(K); the scales bring outputs to ~1 at every K.
    sa = (torch.rand(m, generator=generator) + 0.5) / 64
    sb = (torch.rand(n, generator=generator) + 0.5) / (100 * math.sqrt(k))
    bias = torch.rand(n, generator=generator) * 2 - 1 if shape.get("bias", "bias") == "bias" else torch.empty(0)
    d = torch.full((m, n), float("nan"))
    return (a.to(device), bt.to(device), sa.to(device), sb.to(device), azp_adj.to(device), azp.to(device),
            bias.to(torch.bfloat16).to(device), d.to(torch.bfloat16).to(device))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> torch.Tensor:
    a, bt, sa, sb, azp_adj, azp, bias, d = inputs
    m, k = a.shape
    n = bt.shape[0]
    rc = entry(m, n, k, a.data_ptr(), bt.data_ptr(), sa.data_ptr(), sb.data_ptr(), azp_adj.data_ptr(),
               azp.data_ptr(), bias.data_ptr() if bias.numel() else None, d.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_w8a8_int8_azp_gemm returned cudaError {rc}")
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
    a, bt, sa, sb, azp_adj, azp, bias, d = inputs
    correction = azp.double()[:, None] * azp_adj.double()[None, :]
    out = (exact_int8_matmul(a, bt) - correction) * sa.double()[:, None] * sb.double()[None, :]
    if bias.numel():
        out += bias.double()[None, :]
    return out.to(d.dtype)
