"""The glue of the complete tasks: input layouts, the reference expression, the prompt.

The references are checked element by element against the upstream kernels'
documented storage conventions (written out with explicit index arithmetic), so a
transposed or mis-strided reference fails here, before any GPU sees it.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.problem import import_file
from orchestrator.runner.shapes import default_shape, stress_shapes
from orchestrator.translation import sources
from orchestrator.translation.catalog import find_task, iter_tasks
from orchestrator.translation.prompts import build_prompt, includes_of, prompt_parts

TRANSLATION = REPO_ROOT / "translation"


def _glue(task_id: str):
    task = find_task(task_id, TRANSLATION)
    return task, import_file(task.file("task.py"), "test_translation_glue")


def test_hgemm_reference_follows_the_tn_column_major_convention() -> None:
    _, glue = _glue("tr-cutlass-cute-hgemm")
    m, n, k = 8, 6, 5
    a, b, ct = glue.get_inputs({"m": m, "n": n, "k": k}, torch.Generator().manual_seed(1), "cpu")
    assert a.shape == (m, k) and b.shape == (n, k) and ct.shape == (n, m) and a.dtype == torch.float16
    out = glue.reference((a, b, ct))
    A, B = a.double().flatten().tolist(), b.double().flatten().tolist()  # A[i*ldA + p], B[j*ldB + p]
    C = ct.double().flatten().tolist()                                   # C[i + j*ldC] (column-major)
    for i in range(m):
        for j in range(n):
            want = glue.ALPHA * sum(A[i * k + p] * B[j * k + p] for p in range(k)) + glue.BETA * C[i + j * m]
            assert abs(out.flatten()[i + j * m].item() - want) <= 1e-3 * (1 + abs(want))
    assert glue.OUTPUTS == (2,)


def test_tf32_reference_follows_the_documented_layouts() -> None:
    _, glue = _glue("tr-cutlass-tf32-gemm")
    m, n, k = 4, 8, 12
    a, bt, ct, dt = glue.get_inputs({"m": m, "n": n, "k": k}, torch.Generator().manual_seed(2), "cpu")
    assert torch.isnan(dt).all()  # an output the kernel leaves unwritten cannot pass
    out = glue.reference((a, bt, ct, dt))
    A, B, C = a.flatten().tolist(), bt.flatten().tolist(), ct.flatten().tolist()
    for i in range(m):
        for j in range(n):  # A row-major (ld K), B column-major (ld K), C and D column-major (ld M)
            want = glue.ALPHA * sum(A[i * k + p] * B[p + j * k] for p in range(k)) + glue.BETA * C[i + j * m]
            assert abs(out.flatten()[i + j * m].item() - want) <= 1e-5 * (1 + abs(want))


def test_segment_gemm_reference_follows_the_segment_convention() -> None:
    _, glue = _glue("tr-cutlass-grouped-gemm")
    shape = {"segments": 5, "seg_len_max": 4, "d_in": 16, "d_out": 8, "dtype": "float16"}
    inputs = glue.get_inputs(shape, torch.Generator().manual_seed(3), "cpu")
    indptr, windex, x, w, y, workspace = inputs
    lengths = (indptr[1:] - indptr[:-1]).tolist()
    assert 0 in lengths and sorted(windex.tolist()) == list(range(5))
    assert not y.any() and workspace.numel() == glue.WORKSPACE_BYTES and glue.OUTPUTS == (4, 5)
    out = glue.reference(inputs)
    X, W = x.double(), w.double()
    for seg in range(5):
        for r in range(int(indptr[seg]), int(indptr[seg + 1])):
            for c in range(8):  # y[r, c] = sum_p x[r, p] * W[windex[seg], c, p]
                want = sum(X[r, p].item() * W[int(windex[seg]), c, p].item() for p in range(16))
                assert abs(out[r, c].item() - want) <= 2e-3 * (1 + abs(want))


def test_inputs_are_seeded_and_magnitudes_do_not_grow_with_k() -> None:
    _, glue = _glue("tr-cutlass-tf32-gemm")
    shape = {"m": 64, "n": 64, "k": 4096}
    first = glue.get_inputs(shape, torch.Generator().manual_seed(5), "cpu")
    second = glue.get_inputs(shape, torch.Generator().manual_seed(5), "cpu")
    assert all(torch.equal(x, y) for x, y in zip(first[:3], second[:3]))
    ref = glue.reference(first)
    assert 0.1 < ref.abs().mean().item() < 1.0


def test_argtypes_match_the_declared_signature() -> None:
    for task in iter_tasks(TRANSLATION):
        if task.manifest["glue"] != "complete":
            continue
        glue = import_file(task.file("task.py"), "test_translation_glue")
        signature = task.manifest["entry"]["signature"]
        params = signature[signature.index("(") + 1:signature.rindex(")")].split(",")
        assert len(params) == len(glue.ARGTYPES), task.id
        for param, argtype in zip(params, glue.ARGTYPES):
            kind = param.split()[0]
            expected = (ctypes.c_void_p if "*" in param or "cudaStream_t" in param else
                        ctypes.c_float if kind == "float" else ctypes.c_size_t if kind == "size_t" else ctypes.c_int)
            assert argtype is expected, (task.id, param)
        assert f"{task.manifest['entry']['symbol']}(" in task.file(task.manifest["entry"]["header"]).read_text()


def test_stress_shapes_respect_the_kernels_alignment() -> None:
    for task in iter_tasks(TRANSLATION):
        params = task.manifest["shapes"]
        for shape in stress_shapes(params, task.manifest.get("constraints", []), 8, seed=11):
            for name, spec in params.items():
                if spec.get("type", "int") == "int":
                    assert shape[name] % spec.get("multiple_of", 1) == 0
                    assert spec["min"] <= shape[name] <= spec["max"]
        assert default_shape(params, "cuda")


def test_prompt_shows_a100_sources_and_never_the_h100_reference(cache_dir: Path) -> None:
    task = find_task("tr-cutlass-cute-hgemm", TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    parts = prompt_parts(task, roots)
    text = build_prompt(task, roots)
    a100_text = (roots["cutlass42"] / task.manifest["a100"]["main"]).read_text()
    assert a100_text.strip() in text
    h100_text = (roots["cutlass42"] / task.manifest["h100"]["main"]).read_text()
    assert "wgmma_tma_sm90" not in text and h100_text[-2000:] not in text
    assert task.manifest["title"] not in text and "wgmma" not in parts["a100_techniques"]
    assert task.manifest["entry"]["signature"].split("(")[0].split()[-1] in text
    assert '"m": 4096' in text and "sm_90a" in text
    headers = {h["header"]: h["resolves_to"] for h in parts["headers"]}
    assert headers["cute/tensor.hpp"] == "pinned sources" and headers["thrust/host_vector.h"] == "system / CUDA toolkit"
    assert includes_of('#include <a/b.h>\n  # include "c.h"\n') == [("angle", "a/b.h"), ("quote", "c.h")]


def test_allreduce_reference_is_the_sum_over_ranks() -> None:
    task, glue = _glue("tr-vllm-custom-allreduce")
    shape = {"numel": 384, "dtype": "float16"}
    world_size = 3
    ranks = [glue.get_inputs(shape, torch.Generator().manual_seed(r), "cpu", rank=r, world_size=world_size)
             for r in range(world_size)]
    assert all(torch.isnan(out).all() for _, out in ranks) and glue.OUTPUTS == (1,)
    for rank in range(world_size):
        ref = glue.reference(ranks, rank)
        for i in (0, 1, 383):
            want = sum(ranks[r][0][i].item() for r in range(world_size))
            assert abs(ref[i].item() - want) <= 2e-3 * (1 + abs(want))
    assert glue.SHARED["buffers"](shape, 8) == 8 * 384 * 2
    assert glue.SHARED["flags"](shape, 8) >= 65536 + 384 * 2
    assert task.manifest["shapes"]["numel"]["multiple_of"] % (8 * 6) == 0  # two-shot: numel % (8 * ws) == 0
