"""PopcornBench glue for tr-fa2-bwd: inputs, the entry-point call, the reference.

Storage (see entry.h): Q, K, V, O, dO, dQ, dK, dV [batch, seqlen, heads, head_dim] fp16
(FlashAttention's layout), lse [batch, heads, seqlen] fp32. Q, K, V and dO are randn; O and
lse are what the forward returns for them (computed here in fp32 from the fp16 Q, K, V, O
then rounded to fp16 as a forward kernel stores it); dQ, dK, dV are filled with NaN.
The reference is autograd through an fp32 SDPA of the same fp16 Q, K, V, fed with dO.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

OUTPUTS = (6, 7, 8)  # dQ, dK, dV; Q, K, V, O, dO and lse must stay unchanged
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
SCORE_BLOCK_ELEMENTS = 1 << 28  # fp32 score elements per reference step (1 GiB), so memory stays bounded


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """Scaled scores of fp32 [heads, s, d] Q and K, the causal mask applied: [heads, s, s]."""
    s, d = q.shape[1], q.shape[2]
    scores = (q @ k.transpose(1, 2)) * (1.0 / math.sqrt(d))
    if causal:
        future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)  # key j > query i
        scores = scores.masked_fill(future, float("-inf"))
    return scores


def _head_groups(heads: int, seqlen: int) -> list[tuple[int, int]]:
    """Head ranges whose [group, seqlen, seqlen] fp32 scores fit one step."""
    step = max(1, min(heads, SCORE_BLOCK_ELEMENTS // max(seqlen * seqlen, 1)))
    return [(lo, min(heads, lo + step)) for lo in range(0, heads, step)]


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """O (fp16, as a forward kernel stores it) and lse (fp32, natural log) of fp16 [b, s, h, d] Q, K, V."""
    b, s, h, d = q.shape
    out = torch.empty(b, s, h, d, dtype=torch.float16, device=q.device)
    lse = torch.empty(b, h, s, dtype=torch.float32, device=q.device)
    for bi in range(b):
        for lo, hi in _head_groups(h, s):
            qh, kh, vh = (t[bi, :, lo:hi].transpose(0, 1).float() for t in (q, k, v))  # [heads, s, d]
            scores = _scores(qh, kh, causal)
            block_lse = torch.logsumexp(scores, dim=-1)
            out[bi, :, lo:hi] = (torch.exp(scores - block_lse[..., None]) @ vh).transpose(0, 1).half()
            lse[bi, lo:hi] = block_lse
    return out, lse


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[Any, ...]:
    b, s, h, d = int(shape["batch"]), int(shape["seqlen"]), int(shape["heads"]), int(shape["head_dim"])
    causal = bool(shape.get("causal", False))
    q, k, v, do = (torch.randn(b, s, h, d, generator=generator).to(torch.float16) for _ in range(4))
    # The judge draws inputs on the host; the forward that produces O and lse is deterministic
    # given Q, K, V, so it runs on the judge's GPU when there is one (a host fp32 forward of the
    # largest shapes takes tens of seconds) and comes back to `device`.
    work = "cuda" if torch.cuda.is_available() else "cpu"
    o, lse = forward(q.to(work), k.to(work), v.to(work), causal)
    grads = [torch.full((b, s, h, d), float("nan"), dtype=torch.float16) for _ in range(3)]
    tensors = (q, k, v, o.cpu(), do, lse.cpu(), *grads)
    return tuple(t.to(device) for t in tensors) + (int(causal),)  # a plain int: reading it never syncs


def launch(entry: Any, inputs: tuple[Any, ...], stream: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v, o, do, lse, dq, dk, dv, causal = inputs
    b, s, h, d = q.shape
    rc = entry(b, s, h, d, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), do.data_ptr(), lse.data_ptr(),
               dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), causal, stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_fa_bwd returned cudaError {rc}")
    return dq, dk, dv


def reference(inputs: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK, dV: autograd through softmax(Q K^T / sqrt(d) + mask) V in fp32 from the fp16
    inputs, fed with dO, one batch and one group of heads at a time (bounded memory). O and
    lse are not used: the reference recomputes the forward, as FlashAttention's tests do."""
    q, k, v, o, do, lse, dq, dk, dv, causal = inputs
    b, s, h, d = q.shape
    grads = [torch.empty(b, s, h, d, dtype=torch.float32, device=q.device) for _ in range(3)]
    with torch.enable_grad():  # the judge calls this under no_grad
        for bi in range(b):
            for lo, hi in _head_groups(h, s):
                qh, kh, vh = (t[bi, :, lo:hi].transpose(0, 1).float().requires_grad_() for t in (q, k, v))
                probs = torch.softmax(_scores(qh, kh, bool(causal)), dim=-1)
                out = probs @ vh
                got = torch.autograd.grad(out, (qh, kh, vh), do[bi, :, lo:hi].transpose(0, 1).float())
                for dst, g in zip(grads, got):
                    dst[bi, :, lo:hi] = g.transpose(0, 1)
    return tuple(g.to(dq.dtype) for g in grads)
