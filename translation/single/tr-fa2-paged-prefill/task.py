"""PopcornBench glue for tr-fa2-paged-prefill: inputs, the entry-point call, the reference.

Inputs (see entry.h): q [total_q, 32, 128], qo_indptr, the K and V page pools
[num_pages, page_size, 8, 128] (NHD), kv_indptr, kv_indices, last_page_len (int32, device),
o [total_q, 32, 128] filled with NaN, a workspace, and the host copies of the index arrays
(a plain tuple: the harness moves every tensor to the device).

Request 0 has exactly (qo_len, kv_len); every other request draws its query length in
[ceil(qo_len/2), qo_len] and its KV length in [max(its query length, ceil(kv_len/2)), kv_len].
Pages are scattered at random over a pool with spare pages; the unused slots of each last
page hold finite stale values, which a kernel that reads past kv_len would attend to.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

HEADS_QO, HEADS_KV, HEAD_DIM = 32, 8, 128
WORKSPACE_BYTES = 144 << 20  # 128 MiB float + 8 MiB int (FlashInfer's defaults) + 8 MiB for per-token tables
SCORE_BLOCK = 1 << 26        # fp32 scores per reference step: bounds memory at every shape
OUTPUTS = (7, 8)             # o and the workspace are written; everything else must stay unchanged
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_P = ctypes.c_void_p
ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P,
            _P, _P, _P, _P, _P, ctypes.c_size_t, ctypes.c_int, _P]


def _lengths(shape: dict[str, Any], generator: torch.Generator) -> tuple[list[int], list[int]]:
    batch, qo_max, kv_max = int(shape["batch"]), int(shape["qo_len"]), int(shape["kv_len"])
    qo, kv = [qo_max], [kv_max]
    for _ in range(batch - 1):
        q = int(torch.randint((qo_max + 1) // 2, qo_max + 1, (1,), generator=generator))
        k = int(torch.randint(max(q, (kv_max + 1) // 2), kv_max + 1, (1,), generator=generator))
        qo.append(q)
        kv.append(k)
    return qo, kv


def _cumsum(values: list[int]) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


def get_inputs(shape: dict[str, Any], generator: torch.Generator, device: str) -> tuple[Any, ...]:
    page_size = int(shape["page_size"])
    dtype = DTYPES[shape.get("dtype", "float16")]
    qo, kv = _lengths(shape, generator)
    pages = [-(-k // page_size) for k in kv]
    qo_indptr, kv_indptr = _cumsum(qo), _cumsum(pages)
    last_page_len = [k - (p - 1) * page_size for k, p in zip(kv, pages)]
    pool = kv_indptr[-1] + len(kv)  # spare pages that no request references
    kv_indices = torch.randperm(pool, generator=generator)[: kv_indptr[-1]].to(torch.int32)
    q = torch.randn(qo_indptr[-1], HEADS_QO, HEAD_DIM, generator=generator).to(dtype)
    k_pages = torch.randn(pool, page_size, HEADS_KV, HEAD_DIM, generator=generator).to(dtype)
    v_pages = torch.randn(pool, page_size, HEADS_KV, HEAD_DIM, generator=generator).to(dtype)
    o = torch.full((qo_indptr[-1], HEADS_QO, HEAD_DIM), float("nan"), dtype=dtype)
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8)
    host = (page_size, tuple(qo_indptr), tuple(kv_indptr), tuple(last_page_len))
    ints = (torch.tensor(qo_indptr, dtype=torch.int32), torch.tensor(kv_indptr, dtype=torch.int32))
    device_part = (q, ints[0], k_pages, v_pages, ints[1], kv_indices, torch.tensor(last_page_len, dtype=torch.int32),
                   o, workspace)
    return tuple(t.to(device) for t in device_part) + (host,)


def _host_array(values: tuple[int, ...]) -> Any:
    return (ctypes.c_int32 * len(values))(*values)


def launch(entry: Any, inputs: tuple[Any, ...], stream: int) -> torch.Tensor:
    q, qo_indptr, k_pages, v_pages, kv_indptr, kv_indices, last_page_len, o, workspace, host = inputs
    page_size, qo_host, kv_host, last_host = host
    qo_arr, kv_arr, last_arr = _host_array(qo_host), _host_array(kv_host), _host_array(last_host)
    rc = entry(len(last_host), q.shape[1], k_pages.shape[2], q.shape[2], page_size, q.data_ptr(),
               qo_indptr.data_ptr(), k_pages.data_ptr(), v_pages.data_ptr(), kv_indptr.data_ptr(),
               kv_indices.data_ptr(), last_page_len.data_ptr(), ctypes.addressof(qo_arr), ctypes.addressof(kv_arr),
               ctypes.addressof(last_arr), o.data_ptr(), workspace.data_ptr(), workspace.numel(),
               int(q.dtype == torch.bfloat16), stream)
    if rc != 0:
        raise RuntimeError(f"popcorn_paged_prefill returned cudaError {rc}")
    return o


def reference(inputs: tuple[Any, ...]) -> torch.Tensor:
    """Gather each request's pages, then causal softmax attention aligned to the end of the
    sequence, in fp32 from the fp16/bf16 inputs (exact products; fp32 sums err ~1e-6, far
    below the output's rounding), one request and one block of queries at a time."""
    q, _, k_pages, v_pages, _, kv_indices, _, o, _, host = inputs
    page_size, qo_host, kv_host, last_host = host
    heads_qo, heads_kv, d = q.shape[1], k_pages.shape[2], q.shape[2]
    group = heads_qo // heads_kv
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    for i, last in enumerate(last_host):
        q0, q1 = qo_host[i], qo_host[i + 1]
        pages = kv_indices[kv_host[i]:kv_host[i + 1]].long()
        kv_len = (len(pages) - 1) * page_size + last
        qo_len = q1 - q0
        k = k_pages[pages].reshape(-1, heads_kv, d)[:kv_len].float().permute(1, 0, 2)  # [kv_head, key, d]
        v = v_pages[pages].reshape(-1, heads_kv, d)[:kv_len].float().permute(1, 0, 2)
        # query head h reads kv head h // group: [kv_head, group, query, d]
        qi = q[q0:q1].float().reshape(qo_len, heads_kv, group, d).permute(1, 2, 0, 3)
        keys = torch.arange(kv_len, device=q.device)
        rows = max(1, SCORE_BLOCK // (heads_qo * kv_len))
        for lo in range(0, qo_len, rows):
            hi = min(qo_len, lo + rows)
            scores = torch.matmul(qi[:, :, lo:hi], k.transpose(1, 2)[:, None]) * scale
            last_key = torch.arange(lo, hi, device=q.device) + (kv_len - qo_len)  # causal, aligned to the end
            scores.masked_fill_(keys[None, :] > last_key[:, None], float("-inf"))
            block = torch.matmul(torch.softmax(scores, dim=-1), v[:, None])  # [kv_head, group, rows, d]
            out[q0 + lo:q0 + hi] = block.permute(2, 0, 1, 3).reshape(hi - lo, heads_qo, d)
    return out.to(o.dtype)
