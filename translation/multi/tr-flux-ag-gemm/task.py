"""PopcornBench glue for tr-flux-ag-gemm (multi-GPU): inputs, the call, the reference.

A column-parallel linear layer: rank q holds A_q [m / W, k] (bf16, uniform in [-1, 1]),
its rows of the full activations, and W_q [n, k] (bf16, uniform in [-1, 1] / sqrt(k), so
outputs keep the same spread at every size); out [m, n] starts as NaN. Rank r must end with
cat_q(A_q) @ W_r^T, the gathered rows in rank order. m = m_per_rank * world_size, so every
world size divides it. Shared buffers per rank: see entry.h.
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
OUTPUTS = (2,)
SIGNAL_BYTES = 8192  # [0, 4096) Flux's barrier-all slots, then 64 ready flags (int32)


def _dims(shape: dict[str, Any], world_size: int) -> tuple[int, int, int]:
    return int(shape["m_per_rank"]) * world_size, int(shape["n"]), int(shape["k"])


SHARED = {
    "buffers": lambda shape, world_size: 2 * _dims(shape, world_size)[0] * _dims(shape, world_size)[2],
    "signals": lambda shape, world_size: SIGNAL_BYTES,
}


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str, rank: int,
               world_size: int) -> tuple[torch.Tensor, ...]:
    m, n, k = _dims(shape, world_size)
    a = torch.rand(m // world_size, k, generator=generator) * 2 - 1
    w = (torch.rand(n, k, generator=generator) * 2 - 1) / k ** 0.5
    out = torch.full((m, n), float("nan"))
    return tuple(t.to(torch.bfloat16).to(device) for t in (a, w, out))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], peers: dict[str, int], rank: int, world_size: int,
           stream: int) -> torch.Tensor:
    a, w, out = inputs
    (m, n), k = out.shape, a.shape[1]
    rc = entry(rank, world_size, m, n, k, a.data_ptr(), w.data_ptr(), peers["buffers"], peers["signals"],
               out.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_ag_gemm returned cudaError {rc}")
    return out


def reference(all_inputs: list[tuple[torch.Tensor, ...]], rank: int) -> torch.Tensor:
    gathered = torch.cat([a.double() for a, _, _ in all_inputs])
    return (gathered @ all_inputs[rank][1].double().T).to(torch.bfloat16)
