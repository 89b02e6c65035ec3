"""Glue of the Marlin translation tasks (tr-marlin-gptq-w4a16-gemm, tr-marlin-awq-w4a16-zp-gemm).

The references must follow entry.h exactly (written out here with explicit index arithmetic),
the tolerance must admit the kernels' fp16 dequantization and reject a misplaced group, and the
layout steps the adapters run on the GPU in place of vLLM's Python (marlin_permute_scales,
marlin_zero_points) must agree with vLLM's own Python, taken from the pinned sdist. Building
both sides (Marlin and Machete, minutes each) is left to scripts/gpu/translation_verify.sh.
"""
from __future__ import annotations

import ast
import subprocess
import textwrap
from pathlib import Path

import numpy
import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.compare import compare_outputs
from orchestrator.runner.problem import import_file
from orchestrator.translation import builds, sources
from orchestrator.translation.catalog import find_task
from orchestrator.translation.prompts import build_prompt

TRANSLATION = REPO_ROOT / "translation"
GPTQ, AWQ = "tr-marlin-gptq-w4a16-gemm", "tr-marlin-awq-w4a16-zp-gemm"


def _glue(task_id: str):
    task = find_task(task_id, TRANSLATION)
    return task, import_file(task.file("task.py"), f"test_marlin_{task_id.replace('-', '_')}")


def _nibble(word: int, t: int) -> int:
    return (word >> (4 * t)) & 0xF


def test_gptq_reference_follows_entry_h() -> None:
    _, glue = _glue(GPTQ)
    m, n, k = 3, 256, 256
    inputs = glue.get_inputs({"m": m, "n": n, "k": k}, torch.Generator().manual_seed(1), "cpu")
    a, qweight, scales, c = inputs
    assert qweight.shape == (k // 8, n) and qweight.dtype == torch.int32 and scales.shape == (k // 128, n)
    assert torch.isnan(c.float()).all() and glue.OUTPUTS == (3,)
    out = glue.reference(inputs).double()
    A, Q, S = a.double().tolist(), qweight.tolist(), scales.double().tolist()
    for i, j in ((0, 0), (1, 77), (2, n - 1)):
        # entry.h: W[p, j] = (q(p, j) - 8) * scales[p / 128, j], q(8r + t, j) in nibble t of Q[r, j]
        want = sum(A[i][p] * (_nibble(Q[p // 8][j] & 0xFFFFFFFF, p % 8) - 8) * S[p // 128][j] for p in range(k))
        assert abs(out[i, j].item() - want) <= 2**-10 * (1 + abs(want))  # one fp16 rounding


def test_awq_reference_follows_entry_h() -> None:
    _, glue = _glue(AWQ)
    m, n, k = 2, 256, 384
    inputs = glue.get_inputs({"m": m, "n": n, "k": k}, torch.Generator().manual_seed(2), "cpu")
    a, qweight, scales, qzeros, c = inputs
    assert qweight.shape == (k // 8, n) and qzeros.shape == (k // 128, n // 8) and glue.OUTPUTS == (4,)
    out = glue.reference(inputs).double()
    A, Q, S, Z = a.double().tolist(), qweight.tolist(), scales.double().tolist(), qzeros.tolist()
    for i, j in ((0, 0), (1, 9), (1, n - 1)):
        # entry.h: W[p, j] = (q(p, j) - z(p / 128, j)) * scales[p / 128, j], z(g, 8w + t) in nibble t of zeros[g, w]
        want = sum(A[i][p] * (_nibble(Q[p // 8][j] & 0xFFFFFFFF, p % 8) - _nibble(Z[p // 128][j // 8] & 0xFFFFFFFF, j % 8))
                   * S[p // 128][j] for p in range(k))
        assert abs(out[i, j].item() - want) <= 2**-10 * (1 + abs(want))


@pytest.mark.parametrize("task_id", [GPTQ, AWQ])
def test_packing_round_trips_and_fills_every_nibble(task_id: str) -> None:
    _, glue = _glue(task_id)
    values = torch.randint(0, 16, (32, 16), generator=torch.Generator().manual_seed(3))
    values[0, :] = 15  # the top nibble set: the word is negative as int32
    if task_id == GPTQ:
        packed = glue.pack_gptq(values)
        assert torch.equal(glue.unpack_gptq(packed), values)
    else:
        for dim in (0, 1):
            packed = glue.pack_nibbles(values, dim)
            assert torch.equal(glue.unpack_nibbles(packed, dim), values)
        packed = glue.pack_nibbles(values, 0)
    assert packed.dtype == torch.int32 and (packed < 0).any()


@pytest.mark.parametrize("task_id", [GPTQ, AWQ])
def test_outputs_stay_near_one_at_every_k(task_id: str) -> None:
    _, glue = _glue(task_id)
    for k in (128, 4096):
        inputs = glue.get_inputs({"m": 4, "n": 256, "k": k}, torch.Generator().manual_seed(k), "cpu")
        ref = glue.reference(inputs).float()
        assert 0.3 < ref.abs().mean().item() < 3


def _kernel_like(task_id: str, inputs: tuple, group_shift: int = 0) -> torch.Tensor:
    """What the kernels compute: fp16 dequantization, fp32 accumulation, one fp16 rounding.
    `group_shift` reads every weight's scale (and zero point) from a neighbouring group."""
    _, glue = _glue(task_id)
    a, qweight, scales = inputs[0], inputs[1], inputs[2]
    groups = torch.arange(a.shape[1]) // glue.GROUP
    groups = (groups + group_shift) % scales.shape[0]
    s = scales.float()[groups]
    if task_id == GPTQ:
        w = ((glue.unpack_gptq(qweight) - 8).half().float() * s).half()
    else:  # Machete's form, the noisier one: q * s + (-(s * z)) in fp16
        z = glue.unpack_nibbles(inputs[3], 1)[groups]
        z_scaled = (-(s * z.half().float())).half().float()
        w = (glue.unpack_nibbles(qweight, 0).half().float() * s + z_scaled).half()
    return (a.float() @ w.float()).half()


@pytest.mark.parametrize("task_id", [GPTQ, AWQ])
def test_tolerance_admits_fp16_dequantization_and_rejects_a_misplaced_group(task_id: str) -> None:
    task, glue = _glue(task_id)
    tol = task.manifest["tolerance"]
    inputs = glue.get_inputs({"m": 16, "n": 256, "k": 1024}, torch.Generator().manual_seed(5), "cpu")
    ref = glue.reference(inputs)
    good = compare_outputs(_kernel_like(task_id, inputs), ref, tol)
    assert good.passed, good.message
    assert good.rel_norm_err < 0.2 * tol["rel_norm_max"]  # a wide margin
    bad = compare_outputs(_kernel_like(task_id, inputs, group_shift=1), ref, tol)
    assert not bad.passed


def _vllm_functions(roots: dict) -> dict:
    """vLLM's own marlin_permute_scales / marlin_zero_points (and the helpers they call), taken
    from the pinned sdist's Python and run here on numpy/torch (vLLM itself is not installed)."""
    base = roots["vllm"] / "vllm/model_executor/layers/quantization/utils"
    wanted = {"marlin_utils.py": {"get_scale_perms", "marlin_permute_scales", "marlin_zero_points"},
              "quant_utils.py": {"get_pack_factor", "pack_cols"}}
    namespace: dict = {"numpy": numpy, "torch": torch}
    for name, functions in wanted.items():
        tree = ast.parse((base / name).read_text())
        found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in functions]
        assert {f.name for f in found} == functions
        for node in found:
            node.returns = None
            for arg in node.args.args:
                arg.annotation = None
            exec(compile(ast.Module(body=[node], type_ignores=[]), name, "exec"), namespace)
    return namespace


def test_adapter_layout_steps_match_vllms_python(cache_dir: Path, tmp_path: Path) -> None:
    """marlin_prep.cuh's index math (what the adapters' kernels run) against vLLM's Python."""
    task, glue = _glue(AWQ)
    roots = sources.prepare(task.manifest, cache_dir)
    vllm = _vllm_functions(roots)
    groups, n = 3, 256
    zeros = torch.randint(0, 16, (groups, n), generator=torch.Generator().manual_seed(6))
    packed = glue.pack_nibbles(zeros, 1)  # vLLM's pack_cols layout, as entry.h documents
    assert torch.equal(packed, vllm["pack_cols"](zeros, 4, groups, n))
    (tmp_path / "zeros.bin").write_bytes(packed.numpy().astype(numpy.uint32).tobytes())
    program = tmp_path / "layout_check.cu"
    program.write_text(textwrap.dedent(f'''
        #include <cstdio>
        #include <vector>
        #include "marlin_prep.cuh"
        int main() {{
          const int groups = {groups}, n = {n};
          std::vector<uint32_t> in(groups * n / 8);
          FILE* f = std::fopen("{tmp_path / 'zeros.bin'}", "rb");
          if (!f || std::fread(in.data(), 4, in.size(), f) != in.size()) return 1;
          for (int64_t i = 0; i < int64_t(groups) * n; ++i) std::printf("%lld ", (long long)popcorn::scale_perm_source(i));
          std::printf("\\n");
          for (int g = 0; g < groups; ++g)
            for (int w = 0; w < n / 8; ++w) std::printf("%u ", popcorn::marlin_zero_point_word(in.data(), n / 8, g, w));
          std::printf("\\n");
          return 0;
        }}
    '''))
    exe = tmp_path / "layout_check"
    subprocess.run([builds.nvcc_path(), "-std=c++17", f"-I{TRANSLATION / 'single' / GPTQ}", str(program), "-o", str(exe)],
                   check=True, capture_output=True, text=True, timeout=300)
    perm_line, zp_line = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    source = torch.tensor([int(x) for x in perm_line.split()])
    flat = torch.arange(groups * n, dtype=torch.float64).reshape(groups, n)
    want = vllm["marlin_permute_scales"](flat, groups * 128, n, 128)  # group size < K: the 64-wide permutation
    assert torch.equal(flat.flatten()[source].reshape(groups, n), want)
    ours = torch.tensor([int(x) for x in zp_line.split()], dtype=torch.int64).reshape(groups, n // 8)
    theirs = vllm["marlin_zero_points"](zeros, groups, n, 4).to(torch.int64) & 0xFFFFFFFF
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("task_id", [GPTQ, AWQ])
def test_prompt_shows_marlin_and_never_machete(task_id: str, cache_dir: Path) -> None:
    task = find_task(task_id, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    text = build_prompt(task, roots)
    assert task.file("a100.cu").read_text().strip() in text
    assert (roots["vllm"] / "csrc/quantization/gptq_marlin/marlin_template.h").read_text().strip()[:2000] in text
    assert "machete" not in text.lower() and "h100.cu" not in text
    assert task.manifest["entry"]["symbol"] in text and "sm_90a" in text
