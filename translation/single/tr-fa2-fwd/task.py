"""PopcornBench glue for tr-fa2-fwd: inputs, the entry-point call, the reference.

Storage (see entry.h): Q, K, V, O [batch, seqlen, heads, head_dim] fp16 (FlashAttention's
layout), lse [batch, heads, seqlen] fp32; O and lse are filled with NaN.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

OUTPUTS = (3, 4)  # O and lse; Q, K, V must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
QUERY_BLOCK = 2048  # reference rows per step: bounds the fp32 score block to QUERY_BLOCK x seqlen per head


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[Any, ...]:
    b, s, h, d = int(shape["batch"]), int(shape["seqlen"]), int(shape["heads"]), int(shape["head_dim"])
    q, k, v = (torch.randn(b, s, h, d, generator=generator).to(torch.float16) for _ in range(3))
    o = torch.full((b, s, h, d), float("nan"), dtype=torch.float16)
    lse = torch.full((b, h, s), float("nan"), dtype=torch.float32)
    causal = int(bool(shape.get("causal", False)))  # a plain int: reading it never syncs the device
    return tuple(t.to(device) for t in (q, k, v, o, lse)) + (causal,)


def launch(entry: Any, inputs: tuple[torch.Tensor, ...], stream: int) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v, o, lse, causal = inputs
    b, s, h, d = q.shape
    rc = entry(b, s, h, d, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), causal, stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_fa_fwd returned cudaError {rc}")
    return o, lse


def reference(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d)) V and its log-sum-exp, in fp32 from the fp16 inputs (exact
    products; fp32 sums err ~1e-6, far below the fp16 output's rounding), one head and one
    block of queries at a time so memory stays bounded at every shape."""
    q, k, v, o, lse, causal = inputs
    b, s, h, d = q.shape
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(b, s, h, d, dtype=torch.float32, device=q.device)
    out_lse = torch.empty(b, h, s, dtype=torch.float32, device=q.device)
    keys = torch.arange(s, device=q.device)
    for bi in range(b):
        for hi in range(h):
            kf, vf = k[bi, :, hi].float(), v[bi, :, hi].float()
            for lo in range(0, s, QUERY_BLOCK):
                hi_q = min(s, lo + QUERY_BLOCK)
                scores = (q[bi, lo:hi_q, hi].float() @ kf.T) * scale
                if causal:
                    rows = torch.arange(lo, hi_q, device=q.device)
                    scores.masked_fill_(keys[None, :] > rows[:, None], float("-inf"))
                block_lse = torch.logsumexp(scores, dim=1)
                out[bi, lo:hi_q, hi] = torch.exp(scores - block_lse[:, None]) @ vf
                out_lse[bi, hi, lo:hi_q] = block_lse
    return out.to(o.dtype), out_lse
