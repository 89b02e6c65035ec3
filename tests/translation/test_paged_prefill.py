"""tr-fa2-paged-prefill glue: the page-table inputs, the reference against entry.h's
contract (explicit index arithmetic and PyTorch's SDPA), the prompt and the adapters'
boundary with the H100 reference."""
from __future__ import annotations

import ctypes
import math
from pathlib import Path

import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.problem import import_file
from orchestrator.runner.shapes import default_shape, stress_shapes
from orchestrator.translation import sources
from orchestrator.translation.catalog import find_task
from orchestrator.translation.prompts import build_prompt

TRANSLATION = REPO_ROOT / "translation"
TASK_ID = "tr-fa2-paged-prefill"


def _glue():
    task = find_task(TASK_ID, TRANSLATION)
    return task, import_file(task.file("task.py"), "test_paged_prefill_glue")


def _shape(page_size: int, dtype: str = "float16", batch: int = 3, qo_len: int = 9, kv_len: int = 37) -> dict:
    return {"batch": batch, "qo_len": qo_len, "kv_len": kv_len, "page_size": page_size, "dtype": dtype}


@pytest.mark.parametrize("page_size", [16, 1])
def test_inputs_follow_the_page_table_contract(page_size: int) -> None:
    task, glue = _glue()
    inputs = glue.get_inputs(_shape(page_size, batch=5), torch.Generator().manual_seed(1), "cpu")
    q, qo_indptr, k_pages, v_pages, kv_indptr, kv_indices, last_page_len, o, workspace, host = inputs
    size, qo_host, kv_host, last_host = host
    assert size == page_size and list(qo_host) == qo_indptr.tolist() and list(kv_host) == kv_indptr.tolist()
    assert list(last_host) == last_page_len.tolist()
    assert q.shape == (qo_host[-1], 32, 128) and k_pages.shape[1:] == (page_size, 8, 128) == v_pages.shape[1:]
    assert torch.isnan(o.float()).all() and workspace.numel() == glue.WORKSPACE_BYTES and glue.OUTPUTS == (7, 8)
    assert kv_indices.dtype == torch.int32 and len(set(kv_indices.tolist())) == kv_indices.numel()
    assert k_pages.shape[0] > kv_indices.numel() and 0 <= int(kv_indices.min()) and int(kv_indices.max()) < k_pages.shape[0]
    qo = [b - a for a, b in zip(qo_host, qo_host[1:])]
    kv = [(kv_host[i + 1] - kv_host[i] - 1) * page_size + last_host[i] for i in range(5)]
    assert all(1 <= last <= page_size for last in last_host)
    assert (qo[0], kv[0]) == (9, 37)  # request 0 has the shape's lengths exactly
    assert all(5 <= a <= 9 and max(a, 19) <= b <= 37 for a, b in zip(qo, kv))
    assert len(glue.ARGTYPES) == task.manifest["entry"]["signature"].count(",") + 1


def _want(inputs, i: int, t: int, h: int, c: int) -> float:
    """entry.h, element by element: o[row t of request i, head h, dim c] in double."""
    q, _, k_pages, v_pages, _, kv_indices, _, _, _, host = inputs
    page_size, qo_host, kv_host, last_host = host
    qo_len = qo_host[i + 1] - qo_host[i]
    kv_len = (kv_host[i + 1] - kv_host[i] - 1) * page_size + last_host[i]
    g = h // (32 // 8)

    def row(pages: torch.Tensor, j: int) -> torch.Tensor:
        page = int(kv_indices[kv_host[i] + j // page_size])
        return pages[page, j % page_size, g].double()

    query = q[qo_host[i] + t, h].double()
    keys = range(t + kv_len - qo_len + 1)
    scores = [float(query @ row(k_pages, j)) / math.sqrt(128) for j in keys]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return sum(w * float(row(v_pages, j)[c]) for w, j in zip(weights, keys)) / sum(weights)


@pytest.mark.parametrize("page_size,dtype", [(16, "float16"), (1, "bfloat16")])
def test_reference_follows_entry_h(page_size: int, dtype: str) -> None:
    _, glue = _glue()
    inputs = glue.get_inputs(_shape(page_size, dtype), torch.Generator().manual_seed(2), "cpu")
    out = glue.reference(inputs)
    assert out.dtype == glue.DTYPES[dtype] and out.shape == inputs[0].shape
    qo_host = inputs[-1][1]
    ulp = 2**-8 if dtype == "bfloat16" else 2**-11
    for i, t, h, c in ((0, 0, 0, 0), (0, 8, 31, 127), (1, 0, 5, 3), (2, qo_host[3] - qo_host[2] - 1, 17, 64)):
        want = _want(inputs, i, t, h, c)
        assert abs(out[qo_host[i] + t, h, c].item() - want) <= 1e-4 + ulp * abs(want)


def test_reference_matches_sdpa_across_query_blocks() -> None:
    _, glue = _glue()
    glue.SCORE_BLOCK = 32 * 37 * 2  # two query rows per step: several blocks per request
    inputs = glue.get_inputs(_shape(16, batch=4), torch.Generator().manual_seed(3), "cpu")
    out = glue.reference(inputs)
    q, _, k_pages, v_pages, _, kv_indices, _, _, _, (page_size, qo_host, kv_host, last_host) = inputs
    for i in range(4):
        pages = kv_indices[kv_host[i]:kv_host[i + 1]].long()
        kv_len = (len(pages) - 1) * page_size + last_host[i]
        k, v = (p[pages].reshape(-1, 8, 128)[:kv_len].float().repeat_interleave(4, dim=1).transpose(0, 1)
                for p in (k_pages, v_pages))
        qi = q[qo_host[i]:qo_host[i + 1]].float().transpose(0, 1)
        mask = torch.ones(qi.shape[1], kv_len, dtype=torch.bool).tril(diagonal=kv_len - qi.shape[1])
        want = torch.nn.functional.scaled_dot_product_attention(qi, k, v, attn_mask=mask).transpose(0, 1)
        assert torch.allclose(out[qo_host[i]:qo_host[i + 1]].float(), want, atol=2e-3)


def test_stale_slots_of_the_last_page_would_change_the_answer() -> None:
    """The unused slots hold finite values that differ from the used ones: a kernel that
    attends past kv_len fails the check instead of passing by luck."""
    _, glue = _glue()
    inputs = glue.get_inputs(_shape(16, batch=1, qo_len=5, kv_len=21), torch.Generator().manual_seed(4), "cpu")
    k_pages, kv_indices, host = inputs[2], inputs[5], inputs[-1]
    last_page = int(kv_indices[-1])
    stale = k_pages[last_page, host[3][0]:]
    assert stale.shape[0] == 16 - 5 and torch.isfinite(stale.float()).all() and stale.abs().sum() > 0


def test_launch_passes_host_copies_and_device_pointers() -> None:
    """The ctypes call: 20 arguments in entry.h's order, host arrays holding the index arrays."""
    _, glue = _glue()
    inputs = glue.get_inputs(_shape(16), torch.Generator().manual_seed(5), "cpu")
    seen: dict[str, object] = {}

    def entry(*args):
        seen["args"] = args
        seen["qo_host"] = list((ctypes.c_int32 * 4).from_address(args[12]))
        seen["last_host"] = list((ctypes.c_int32 * 3).from_address(args[14]))
        return 0

    out = glue.launch(entry, inputs, 0)
    args = seen["args"]
    assert len(args) == len(glue.ARGTYPES) == 20 and out is inputs[7]
    assert args[:5] == (3, 32, 8, 128, 16) and args[5] == inputs[0].data_ptr() and args[15] == inputs[7].data_ptr()
    assert seen["qo_host"] == inputs[1].tolist() and seen["last_host"] == inputs[6].tolist()
    assert args[17] == glue.WORKSPACE_BYTES and args[18] == 0


def test_shapes_disclosed_and_stressed_fit_their_constraints() -> None:
    task, glue = _glue()
    shapes = task.manifest["shapes"]
    constraints = task.manifest["constraints"]
    disclosed = default_shape(shapes, "cuda")
    assert disclosed == {"batch": 16, "qo_len": 1024, "kv_len": 4096, "page_size": 16, "dtype": "float16"}
    for shape in stress_shapes(shapes, constraints, 8, seed=6, device="cuda"):
        assert shape["qo_len"] <= shape["kv_len"] and shape["batch"] * shape["kv_len"] <= 2**18
    cpu = default_shape(shapes, "cpu")
    assert glue.reference(glue.get_inputs(cpu, torch.Generator().manual_seed(7), "cpu")).isfinite().all()


def test_prompt_shows_the_a100_side_only(cache_dir: Path) -> None:
    task, _ = _glue()
    roots = sources.prepare(task.manifest, cache_dir)
    text = build_prompt(task, roots)
    assert task.file("a100.cu").read_text().strip() in text and task.file("entry.h").read_text().strip() in text
    assert "BatchPrefillWithPagedKVCacheKernel" in text and "popcorn_paged_prefill" in text
    # scheduler.cuh (the A100 side's planner) also holds PrefillSM90Plan: the kernel files stay out
    assert "hopper/prefill_sm90.cuh" not in text and "sparse_mainloop" not in text and "h100.cu" not in text
    assert task.file("h100.cu").read_text().strip()[:2000] not in text


def test_adapters_sit_on_the_right_side_of_the_reference_boundary(cache_dir: Path) -> None:
    """The A100 adapter (where a port starts) includes no H100 file; the H100 adapter is refused.
    nvcc only preprocesses here (-M); compiling both sides is left to `translation build` and the
    H200 script (A100 74 s, H100 202 s on 2 shared cores)."""
    from orchestrator.translation import integrity

    task, _ = _glue()
    roots = sources.prepare(task.manifest, cache_dir)
    assert integrity.reference_leak(task, roots, task.file("a100.cu")) is None
    leak = integrity.reference_leak(task, roots, task.file("h100.cu"))
    assert leak is not None and leak.startswith("reference_include")
