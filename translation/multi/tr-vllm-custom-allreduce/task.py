"""PopcornBench glue for tr-vllm-custom-allreduce (multi-GPU): inputs, the call, the reference.

Each rank holds x_r [numel] (fp16 or bf16, uniform in [-1, 1]) and an output buffer
filled with NaN; every rank must end with sum_r x_r. Shared buffers per rank (see
entry.h): "buffers" (world_size * numel * 2 bytes) and "flags" (65536 + numel * 2).
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
OUTPUTS = (1,)
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
SHARED = {
    "buffers": lambda shape, world_size: world_size * int(shape["numel"]) * 2,
    "flags": lambda shape, world_size: 65536 + int(shape["numel"]) * 2,
}


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str, rank: int,
               world_size: int) -> tuple[torch.Tensor, ...]:
    dtype = DTYPES[shape.get("dtype", "bfloat16")]
    x = torch.rand(int(shape["numel"]), generator=generator) * 2 - 1
    out = torch.full_like(x, float("nan"))
    return x.to(dtype).to(device), out.to(dtype).to(device)


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], peers: dict[str, int], rank: int, world_size: int,
           stream: int) -> torch.Tensor:
    x, out = inputs
    rc = entry(rank, world_size, peers["buffers"], peers["flags"], x.data_ptr(), out.data_ptr(), x.numel(),
               int(x.dtype == torch.bfloat16), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_allreduce returned cudaError {rc}")
    return out


def reference(all_inputs: list[tuple[torch.Tensor, ...]], rank: int) -> torch.Tensor:
    total = sum(inputs[0].double() for inputs in all_inputs)
    return total.to(all_inputs[0][0].dtype)
