"""PopcornBench glue for tr-vllm-moe-finalize-allreduce (multi-GPU): inputs, the call, the reference.

Each rank holds its experts' output rows in permuted order, expert_out [tokens * top_k,
hidden] (bf16, uniform in [-1, 1] / sqrt(world_size), so the sum over ranks keeps the same
spread at every world size), routing weights scales [tokens, top_k] (fp32, a softmax per
token, as renormalized top-k weights are), permuted_index [tokens, top_k] (int32, a random
permutation of the rows), its residual [tokens, hidden] (uniform in [-1, 1]) and gamma
[hidden] (uniform in [0.5, 1.5]); residual_out and norm_out start as NaN. Every rank must
end with r = residual + sum_q t_q, t_q[i] = sum_j scales_q[i, j] * expert_out_q[permuted_index_q[i, j]],
and RMSNorm(r) * gamma (eps 1e-6), with its own residual and gamma. Shared buffers per
rank: see entry.h.
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
OUTPUTS = (5, 6)  # residual_out, norm_out
EPS = 1e-6

SHARED = {
    # the H100 reference's Lamport triple buffer: 3 slots of world_size * tokens * hidden bf16
    "buffers": lambda shape, world_size: 6 * world_size * int(shape["tokens"]) * int(shape["hidden"]),
    "flags": lambda shape, world_size: 65536 + 2 * int(shape["tokens"]) * int(shape["hidden"]),
}


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str, rank: int,
               world_size: int) -> tuple[torch.Tensor, ...]:
    tokens, hidden, top_k = int(shape["tokens"]), int(shape["hidden"]), int(shape["top_k"])
    expert_out = (torch.rand(tokens * top_k, hidden, generator=generator) * 2 - 1) / world_size ** 0.5
    scales = torch.softmax(torch.randn(tokens, top_k, generator=generator), dim=-1)
    permuted_index = torch.randperm(tokens * top_k, generator=generator).to(torch.int32).view(tokens, top_k)
    residual = torch.rand(tokens, hidden, generator=generator) * 2 - 1
    gamma = torch.rand(hidden, generator=generator) + 0.5
    nan = torch.full((tokens, hidden), float("nan"), dtype=torch.bfloat16)
    bf16 = torch.bfloat16
    out = (expert_out.to(bf16), scales.float(), permuted_index, residual.to(bf16), gamma.to(bf16), nan, nan.clone())
    return tuple(t.to(device) for t in out)


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], peers: dict[str, int], rank: int, world_size: int,
           stream: int) -> tuple[torch.Tensor, torch.Tensor]:
    expert_out, scales, permuted_index, residual, gamma, residual_out, norm_out = inputs
    tokens, top_k = scales.shape
    rc = entry(rank, world_size, peers["buffers"], peers["flags"], expert_out.data_ptr(), scales.data_ptr(),
               permuted_index.data_ptr(), top_k, residual.data_ptr(), gamma.data_ptr(), EPS,
               residual_out.data_ptr(), norm_out.data_ptr(), tokens, expert_out.shape[1], stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_moe_finalize_allreduce returned cudaError {rc}")
    return residual_out, norm_out


def finalize(expert_out: torch.Tensor, scales: torch.Tensor, permuted_index: torch.Tensor) -> torch.Tensor:
    """t[i] = sum_j scales[i, j] * expert_out[permuted_index[i, j]], in fp64."""
    rows = expert_out.double()[permuted_index.long()]  # [tokens, top_k, hidden]
    return (scales.double().unsqueeze(-1) * rows).sum(dim=1)


def reference(all_inputs: list[tuple[torch.Tensor, ...]], rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    residual, gamma = all_inputs[rank][3], all_inputs[rank][4]
    r = residual.double() + sum(finalize(*inputs[:3]) for inputs in all_inputs)
    y = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double()
    return r.to(torch.bfloat16), y.to(torch.bfloat16)
