"""PopcornBench glue for tr-vllm-allreduce-rmsnorm (multi-GPU): inputs, the call, the reference.

Each rank holds x_r [tokens, hidden] (bf16, uniform in [-1, 1] / sqrt(world_size), so the
sum over ranks keeps the same spread at every world size), its residual [tokens, hidden]
(uniform in [-1, 1]) and gamma [hidden] (uniform in [0.5, 1.5]); residual_out and
norm_out start as NaN. Every rank must end with r = residual + sum_q x_q and
RMSNorm(r) * gamma (eps 1e-6), with its own residual and gamma. Shared buffers per rank:
see entry.h.
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
            ctypes.c_void_p]
OUTPUTS = (3, 4)  # residual_out, norm_out
EPS = 1e-6
ONESHOT_MAX_TOKENS = 128  # the H100 reference's Lamport path: 3 slots of world_size * tokens * hidden


def _buffer_bytes(shape: dict[str, Any], world_size: int) -> int:
    tokens, hidden = int(shape["tokens"]), int(shape["hidden"])
    slots = max(2, 3 * world_size) if tokens <= ONESHOT_MAX_TOKENS else 2
    return 2 * tokens * hidden * slots


SHARED = {
    "buffers": _buffer_bytes,
    "flags": lambda shape, world_size: 65536 + 2 * int(shape["tokens"]) * int(shape["hidden"]),
}


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str, rank: int,
               world_size: int) -> tuple[torch.Tensor, ...]:
    tokens, hidden = int(shape["tokens"]), int(shape["hidden"])
    x = (torch.rand(tokens, hidden, generator=generator) * 2 - 1) / world_size ** 0.5
    residual = torch.rand(tokens, hidden, generator=generator) * 2 - 1
    gamma = torch.rand(hidden, generator=generator) + 0.5
    nan = torch.full((tokens, hidden), float("nan"))
    return tuple(t.to(torch.bfloat16).to(device) for t in (x, residual, gamma, nan, nan.clone()))


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], peers: dict[str, int], rank: int, world_size: int,
           stream: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, residual, gamma, residual_out, norm_out = inputs
    tokens, hidden = x.shape
    rc = entry(rank, world_size, peers["buffers"], peers["flags"], x.data_ptr(), residual.data_ptr(),
               gamma.data_ptr(), EPS, residual_out.data_ptr(), norm_out.data_ptr(), tokens, hidden, stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_allreduce_rmsnorm returned cudaError {rc}")
    return residual_out, norm_out


def reference(all_inputs: list[tuple[torch.Tensor, ...]], rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    _, residual, gamma, _, _ = all_inputs[rank]
    r = residual.double() + sum(inputs[0].double() for inputs in all_inputs)
    y = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double()
    return r.to(torch.bfloat16), y.to(torch.bfloat16)
