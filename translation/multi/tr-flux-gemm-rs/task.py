"""PopcornBench glue for tr-flux-gemm-rs (multi-GPU): inputs, the call, the reference.

A row-parallel linear layer: rank q holds A_q [m, k_local] (bf16, uniform in [-1, 1]) and
W_q [n, k_local] (bf16, uniform in [-1, 1] / sqrt(world_size * k_local), so outputs keep
the same spread at every size); out [m / world_size, n] starts as NaN. Rank r must end
with rows [r m / W, (r + 1) m / W) of sum_q A_q @ W_q^T. m = m_per_rank * world_size, so
every world size divides it. Shared buffers per rank: see entry.h.
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
OUTPUTS = (2,)


def _dims(shape: dict[str, Any], world_size: int) -> tuple[int, int, int]:
    return int(shape["m_per_rank"]) * world_size, int(shape["n"]), int(shape["k_local"])


def _flag_bytes(shape: dict[str, Any], world_size: int) -> int:
    m, n, _ = _dims(shape, world_size)
    return 65536 + 2048 * (m // 128) * (n // 128)


SHARED = {
    "buffers": lambda shape, world_size: 2 * _dims(shape, world_size)[0] * _dims(shape, world_size)[1],
    "flags": _flag_bytes,
}


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str, rank: int,
               world_size: int) -> tuple[torch.Tensor, ...]:
    m, n, k_local = _dims(shape, world_size)
    a = torch.rand(m, k_local, generator=generator) * 2 - 1
    w = (torch.rand(n, k_local, generator=generator) * 2 - 1) / (world_size * k_local) ** 0.5
    out = torch.full((m // world_size, n), float("nan"))
    return tuple(t.to(torch.bfloat16).to(device) for t in (a, w, out))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], peers: dict[str, int], rank: int, world_size: int,
           stream: int) -> torch.Tensor:
    a, w, out = inputs
    (m, k_local), n = a.shape, w.shape[0]
    rc = entry(rank, world_size, m, n, k_local, a.data_ptr(), w.data_ptr(), peers["buffers"], peers["flags"],
               out.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_gemm_rs returned cudaError {rc}")
    return out


def reference(all_inputs: list[tuple[torch.Tensor, ...]], rank: int) -> torch.Tensor:
    world_size = len(all_inputs)
    rows = all_inputs[0][0].shape[0] // world_size
    block = slice(rank * rows, (rank + 1) * rows)
    total = sum(a[block].double() @ w.double().T for a, w, _ in all_inputs)
    return total.to(torch.bfloat16)
