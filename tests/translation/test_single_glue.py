"""Glue of the vLLM W8A8 and FlashAttention-2 translation tasks: references written out
with explicit index arithmetic, the torch shim their adapters compile against, prompts.

The references must follow entry.h exactly (a transposed operand or a misplaced zero
point fails here, before any GPU sees it); the int8 references must also be exact.
"""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.problem import import_file
from orchestrator.translation import builds, sources
from orchestrator.translation.catalog import find_task
from orchestrator.translation.prompts import build_prompt, prompt_parts

TRANSLATION = REPO_ROOT / "translation"
SHIM = TRANSLATION / "common" / "torch_shim"


def _glue(task_id: str):
    task = find_task(task_id, TRANSLATION)
    return task, import_file(task.file("task.py"), f"test_single_glue_{task_id.replace('-', '_')}")


@pytest.mark.parametrize("scales", ["token_channel", "token_tensor", "tensor_channel", "tensor_tensor"])
def test_w8a8_reference_follows_entry_h(scales: str) -> None:
    _, glue = _glue("tr-vllm-w8a8-int8-gemm")
    m, n, k = 3, 16, 32
    shape = {"m": m, "n": n, "k": k, "scales": scales, "bias": "bias"}
    a, bt, sa, sb, bias, d = glue.get_inputs(shape, torch.Generator().manual_seed(1), "cpu")
    assert a.dtype == bt.dtype == torch.int8 and bt.shape == (n, k) and torch.isnan(d.float()).all()
    assert sa.numel() == (m if scales.startswith("token") else 1) and sb.numel() == (n if scales.endswith("channel") else 1)
    out = glue.reference((a, bt, sa, sb, bias, d))
    assert out.dtype == torch.bfloat16 and glue.OUTPUTS == (5,)
    A, B = a.tolist(), bt.tolist()  # B column-major: B[p][j] = Bt[j][p]
    for i in range(m):
        for j in range(n):
            acc = sum(A[i][p] * B[j][p] for p in range(k))
            want = sa[i if sa.numel() > 1 else 0].item() * sb[j if sb.numel() > 1 else 0].item() * acc + bias[j].item()
            assert abs(out[i, j].item() - want) <= 2**-8 * (1 + abs(want))  # one bf16 rounding


def test_int8_reference_matmul_is_exact_at_large_k() -> None:
    _, glue = _glue("tr-vllm-w8a8-int8-gemm")
    k = 4096 + 16
    a = torch.full((2, k), -128, dtype=torch.int8)  # the largest products, all of one sign
    bt = torch.full((3, k), -128, dtype=torch.int8)
    bt[1, ::2] = 127
    bt[2, 1::3] = 1
    want = (a.long() @ bt.long().T).double()  # exact integers
    for use_int_mm in (False, True):  # the fp32-chunk path, and the int8 GEMM path the GPU takes
        got = glue.exact_int8_matmul(a, bt, use_int_mm=use_int_mm)
        assert got.dtype == torch.float64 and torch.equal(got, want)
    assert 128 * 128 * k > 2**24  # beyond fp32's exact integers: the chunking is what keeps it exact


def test_w8a8_outputs_stay_near_one_at_every_k() -> None:
    _, glue = _glue("tr-vllm-w8a8-int8-gemm")
    for k in (64, 4096):
        inputs = glue.get_inputs({"m": 8, "n": 32, "k": k, "bias": "none"}, torch.Generator().manual_seed(k), "cpu")
        assert inputs[4].numel() == 0  # no bias: NULL
        ref = glue.reference(inputs).float()
        assert 0.2 < ref.abs().mean().item() < 5


def test_azp_reference_is_the_zero_point_shifted_scaled_gemm() -> None:
    _, glue = _glue("tr-vllm-w8a8-int8-azp-gemm")
    m, n, k = 4, 16, 48
    inputs = glue.get_inputs({"m": m, "n": n, "k": k, "bias": "bias"}, torch.Generator().manual_seed(2), "cpu")
    a, bt, sa, sb, azp_adj, azp, bias, d = inputs
    assert azp_adj.dtype == azp.dtype == torch.int32 and azp.shape == (m,) and glue.OUTPUTS == (7,)
    assert torch.equal(azp_adj.long(), bt.long().sum(dim=1))  # J @ B
    assert azp.abs().max() > 0
    out = glue.reference(inputs).double()
    # entry.h: D = sa * sb * ((A - azp) @ B) + bias, with the shift applied to A itself.
    shifted = (a.long() - azp.long()[:, None]) @ bt.long().T
    want = sa.double()[:, None] * sb.double()[None, :] * shifted.double() + bias.double()[None, :]
    assert (out - want).abs().max().item() <= 2**-8 * (1 + want.abs().max().item())  # one bf16 rounding


@pytest.mark.parametrize("causal", [False, True])
def test_fa2_reference_follows_entry_h(causal: bool) -> None:
    _, glue = _glue("tr-fa2-fwd")
    b, s, h, d = 2, 24, 3, 128
    shape = {"batch": b, "seqlen": s, "heads": h, "head_dim": d, "causal": causal}
    inputs = glue.get_inputs(shape, torch.Generator().manual_seed(3), "cpu")
    q, k, v, o, lse, flag = inputs
    assert q.shape == (b, s, h, d) and q.dtype == torch.float16 and lse.shape == (b, h, s)
    assert torch.isnan(o.float()).all() and torch.isnan(lse).all() and flag == int(causal)
    assert glue.OUTPUTS == (3, 4)
    out, out_lse = glue.reference(inputs)
    Q, K, V = (t.double() for t in (q, k, v))
    for bi, hi, i in ((0, 0, 0), (1, 2, 5), (1, 1, s - 1)):
        keys = range(i + 1) if causal else range(s)  # entry.h: causal masks j > i
        scores = [sum(Q[bi, i, hi, c] * K[bi, j, hi, c] for c in range(d)).item() / math.sqrt(d) for j in keys]
        top = max(scores)
        denom = sum(math.exp(x - top) for x in scores)
        assert abs(out_lse[bi, hi, i].item() - (top + math.log(denom))) < 1e-4
        for c in (0, d - 1):
            want = sum(math.exp(x - top) / denom * V[bi, j, hi, c].item() for x, j in zip(scores, keys))
            assert abs(out[bi, i, hi, c].item() - want) < 2e-3
    if causal:  # the first query sees only the first key
        assert torch.allclose(out[:, 0].float(), v[:, 0].float(), atol=1e-3)


def test_fa2_reference_matches_sdpa_across_query_blocks() -> None:
    _, glue = _glue("tr-fa2-fwd")
    glue.QUERY_BLOCK = 16  # several blocks per head
    inputs = glue.get_inputs({"batch": 1, "seqlen": 40, "heads": 2, "head_dim": 128, "causal": True},
                             torch.Generator().manual_seed(4), "cpu")
    out, _ = glue.reference(inputs)
    q, k, v = (t.float().transpose(1, 2) for t in inputs[:3])
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
    assert torch.allclose(out.float(), want, atol=2e-3)


def test_torch_shim_gives_vllm_and_flash_attention_their_meaning(tmp_path: Path) -> None:
    """The adapters' torch::Tensor views, the current stream and the error macros (host code only)."""
    program = tmp_path / "shim_check.cpp"
    program.write_text(r'''
#include <torch/all.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/detail/UnpackRaw.cuh>
#include <c10/cuda/CUDAException.h>
#include <cstdio>
int main() {
  int8_t buf[1];
  torch::Tensor b(buf, torch::kInt8, {64, 48}, {1, 64});  // column-major K x N, as the adapters pass B
  torch::Tensor s(buf, torch::kFloat32, {1, 48}, {});
  std::printf("b %ld %ld %ld %ld %ld %d\n", (long)b.size(0), (long)b.size(1), (long)b.stride(0), (long)b.stride(1),
              (long)b.numel(), (int)b.is_contiguous());
  std::printf("s %ld %ld %d %ld\n", (long)s.stride(0), (long)s.stride(1), (int)s.is_contiguous(), (long)s.size(-1));
  cudaStream_t fake = reinterpret_cast<cudaStream_t>(0x1234);
  { popcorn::StreamScope on(fake); std::printf("stream %d\n", (int)(at::cuda::getCurrentCUDAStream(0) == fake)); }
  std::printf("restored %d\n", (int)(at::cuda::getCurrentCUDAStream() == nullptr));
  try { TORCH_CHECK(b.dtype() == torch::kBFloat16, "dtype is ", b.dtype()); }
  catch (const std::exception& e) { std::printf("check: %s\n", e.what()); }
  try { C10_CUDA_CHECK(cudaErrorInvalidValue); } catch (const std::exception& e) { std::printf("cuda: %s\n", e.what()); }
  auto [seed, offset] = at::cuda::philox::unpack(at::PhiloxCudaState(7, 9));
  std::printf("philox %lu %lu\n", (unsigned long)seed, (unsigned long)offset);
  return 0;
}
''')
    exe = tmp_path / "shim_check"
    subprocess.run([builds.nvcc_path(), "-std=c++17", "-x", "c++", f"-I{SHIM}", str(program), "-o", str(exe)],
                   check=True, capture_output=True, text=True, timeout=300)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    assert lines == ["b 64 48 1 64 3072 0", "s 48 1 1 48", "stream 1", "restored 1",
                     "check: Expected b.dtype() == torch::kBFloat16 to be true. dtype is Char",
                     "cuda: CUDA error: invalid argument", "philox 7 9"]


@pytest.mark.parametrize("task_id", ["tr-vllm-w8a8-int8-gemm", "tr-fa2-fwd"])
def test_prompt_shows_the_a100_side_only(task_id: str, cache_dir: Path) -> None:
    task = find_task(task_id, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    text = build_prompt(task, roots)
    parts = prompt_parts(task, roots)
    a100 = task.manifest["a100"]
    assert (roots[a100["pin"]] / a100["main"]).read_text().strip()[:4000] in text
    assert task.file("a100.cu").read_text().strip() in text
    h100_main = Path(task.manifest["h100"]["main"]).name
    assert h100_main not in text and "h100.cu" not in text
    assert task.manifest["entry"]["symbol"] in text and "sm_90a" in text
    headers = {h["header"]: h["resolves_to"] for h in parts["headers"]}
    assert headers.get("cute/tensor.hpp") == "pinned sources"


@pytest.mark.parametrize("task_id", ["tr-vllm-w8a8-int8-gemm", "tr-fa2-fwd"])
def test_h100_sources_list_is_what_the_integrity_check_forbids(task_id: str, cache_dir: Path) -> None:
    """The A100 adapter (what a faithful port starts from) passes; the H100 adapter is refused."""
    from orchestrator.translation import integrity

    task = find_task(task_id, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    assert integrity.reference_leak(task, roots, task.file("a100.cu")) is None
    leak = integrity.reference_leak(task, roots, task.file("h100.cu"))
    assert leak is not None and leak.startswith("reference_include")
