"""The glue of the fused all-reduce and GEMM + reduce-scatter multi-GPU tasks, checked on a CPU.

tr-vllm-allreduce-rmsnorm, tr-vllm-moe-finalize-allreduce and tr-flux-gemm-rs: the
references against explicit per-element arithmetic, the manifests' tolerances against
CPU emulations of both upstream kernels' bf16 rounding orders (they must pass; a kernel
that drops a rank, the residual or takes another rank's rows must not), the shared
buffers against what the upstream workspaces use, and the prompts (A100 sources shown,
the H100 kernels never). The kernels themselves run on the GPU machine
(scripts/gpu/translation_verify_multi.sh).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.compare import compare_outputs
from orchestrator.runner.problem import import_file
from orchestrator.translation import sources
from orchestrator.translation.catalog import find_task
from orchestrator.translation.prompts import build_prompt

TRANSLATION = REPO_ROOT / "translation"
RMSNORM, MOE, FLUX_RS = "tr-vllm-allreduce-rmsnorm", "tr-vllm-moe-finalize-allreduce", "tr-flux-gemm-rs"
BF16 = torch.bfloat16


def _glue(task_id: str) -> tuple[Any, Any]:
    task = find_task(task_id, TRANSLATION)
    return task, import_file(task.file("task.py"), f"test_multi_glue_{task_id.replace('-', '_')}")


def _ranks(glue: Any, shape: dict[str, Any], world_size: int, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    return [glue.get_inputs(shape, torch.Generator().manual_seed(seed * 1000 + r), "cpu", rank=r,
                            world_size=world_size) for r in range(world_size)]


def _norm(r: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    return r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * gamma


def test_rmsnorm_reference_is_residual_plus_rank_sum_then_rmsnorm() -> None:
    _, glue = _glue(RMSNORM)
    world_size, tokens, hidden = 3, 2, 16
    ranks = _ranks(glue, {"tokens": tokens, "hidden": hidden}, world_size)
    assert all(torch.isnan(inp[3]).all() and torch.isnan(inp[4]).all() for inp in ranks)
    assert glue.OUTPUTS == (3, 4)
    for rank in range(world_size):
        r_ref, y_ref = glue.reference(ranks, rank)
        residual, gamma = ranks[rank][1], ranks[rank][2]
        for t in range(tokens):
            row = [residual[t, h].item() + sum(ranks[q][0][t, h].item() for q in range(world_size))
                   for h in range(hidden)]
            inv = (sum(v * v for v in row) / hidden + glue.EPS) ** -0.5
            for h in (0, 7, 15):
                assert abs(r_ref[t, h].item() - row[h]) <= 1e-2 * (1 + abs(row[h]))
                want = row[h] * inv * gamma[h].item()
                assert abs(y_ref[t, h].item() - want) <= 1e-2 * (1 + abs(want))


def test_moe_reference_unpermutes_weights_and_sums_over_ranks() -> None:
    _, glue = _glue(MOE)
    world_size, tokens, top_k, hidden = 2, 3, 4, 16
    ranks = _ranks(glue, {"tokens": tokens, "top_k": top_k, "hidden": hidden}, world_size)
    for expert_out, scales, index, *_ in ranks:
        assert sorted(index.flatten().tolist()) == list(range(tokens * top_k)) and index.dtype == torch.int32
        assert torch.allclose(scales.sum(-1), torch.ones(tokens)) and scales.dtype == torch.float32
        assert expert_out.shape == (tokens * top_k, hidden)
    assert glue.OUTPUTS == (5, 6)
    r_ref, y_ref = glue.reference(ranks, 1)
    residual, gamma = ranks[1][3], ranks[1][4]
    for t in range(tokens):
        row = []
        for h in range(hidden):
            total = residual[t, h].item()
            for expert_out, scales, index, *_ in ranks:
                total += sum(scales[t, j].item() * expert_out[int(index[t, j]), h].item() for j in range(top_k))
            row.append(total)
        inv = (sum(v * v for v in row) / hidden + glue.EPS) ** -0.5
        for h in (0, 5, 15):
            assert abs(r_ref[t, h].item() - row[h]) <= 1e-2 * (1 + abs(row[h]))
            assert abs(y_ref[t, h].item() - row[h] * inv * gamma[h].item()) <= 1e-2 * (1 + abs(row[h] * inv))


def test_gemm_rs_reference_is_this_ranks_rows_of_the_summed_products() -> None:
    _, glue = _glue(FLUX_RS)
    world_size, shape = 3, {"m_per_rank": 2, "n": 5, "k_local": 4}
    ranks = _ranks(glue, shape, world_size)
    assert ranks[0][0].shape == (6, 4) and ranks[0][1].shape == (5, 4) and ranks[0][2].shape == (2, 5)
    assert glue.OUTPUTS == (2,) and all(torch.isnan(out).all() for *_, out in ranks)
    for rank in range(world_size):
        ref = glue.reference(ranks, rank)
        for i in range(2):
            for j in range(5):
                row = rank * 2 + i  # A_q [m, k_local] row-major, W_q [n, k_local] row-major
                want = sum(ranks[q][0][row, p].item() * ranks[q][1][j, p].item()
                           for q in range(world_size) for p in range(4))
                assert abs(ref[i, j].item() - want) <= 1e-2 * (1 + abs(want))


# The upstream kernels' arithmetic, rounding where they round (bf16 storage, fp32 math).
def _finish(total: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, eps: float,
            vllm: bool) -> tuple[torch.Tensor, torch.Tensor]:
    r = (total.float() + residual.float()).to(BF16)
    scale = torch.rsqrt(r.float().pow(2).mean(-1, keepdim=True) + eps)
    if vllm:  # _f16Vec: *= s, then *= weight, each rounded to bf16
        y = ((r.float() * scale).to(BF16).float() * gamma.float()).to(BF16)
    else:     # FusedOp::rms_norm: one rounding
        y = (r.float() * scale * gamma.float()).to(BF16)
    return r, y


def _rmsnorm_kernel(ranks: list, rank: int, eps: float, vllm: bool, drop: str = "") -> tuple[torch.Tensor, ...]:
    contributing = ranks[:-1] if drop == "rank" else ranks
    total = sum(inp[0].float() for inp in contributing).to(BF16)  # fp32 sums, rounded once
    residual = torch.zeros_like(ranks[rank][1]) if drop == "residual" else ranks[rank][1]
    return _finish(total, residual, ranks[rank][2], eps, vllm)


def _moe_kernel(ranks: list, rank: int, eps: float, vllm: bool, drop: str = "") -> tuple[torch.Tensor, ...]:
    parts = []
    for expert_out, scales, index, *_ in ranks[:-1] if drop == "rank" else ranks:
        rows = expert_out[index.long()]  # [tokens, top_k, hidden]
        if vllm:  # finalizeMoeRoutingKernel: fp32 accumulation
            parts.append((scales.unsqueeze(-1) * rows.float()).sum(1).to(BF16))
        else:     # moefinalize kernel: bf16 accumulator, each scaled term rounded
            acc = torch.zeros(rows.shape[0], rows.shape[2], dtype=BF16)
            for j in range(rows.shape[1]):
                acc = (acc.float() + (rows[:, j].float() * scales[:, j:j + 1]).to(BF16).float()).to(BF16)
            parts.append(acc)
    if vllm:
        total = sum(p.float() for p in parts).to(BF16)
    else:  # Lamport all-reduce: pairwise vec_add, rounded after every rank
        total = parts[0]
        for p in parts[1:]:
            total = (total.float() + p.float()).to(BF16)
    residual = torch.zeros_like(ranks[rank][3]) if drop == "residual" else ranks[rank][3]
    return _finish(total, residual, ranks[rank][4], eps, vllm)


def _gemm_rs_kernel(ranks: list, rank: int, eps: float, a100: bool, drop: str = "") -> torch.Tensor:
    rows = ranks[0][0].shape[0] // len(ranks)
    owner = (rank + 1) % len(ranks) if drop == "rows" else rank
    block = slice(owner * rows, (owner + 1) * rows)
    contributing = ranks[:-1] if drop == "rank" else ranks
    parts = [(a[block].float() @ w.float().T).to(BF16) for a, w, _ in contributing]  # bf16 partials
    if a100:  # Flux sm80: partials scattered to their owner, summed in fp32 (torch .sum)
        return sum(p.float() for p in parts).to(BF16)
    local = rank if rank < len(parts) else 0  # Flux sm90: local tile copied, peers' added in bf16
    total = parts[local]
    for q, p in enumerate(parts):
        if q != local:
            total = (total.float() + p.float()).to(BF16)
    return total


CASES: list[tuple[str, dict[str, Any], Callable, tuple[str, ...]]] = [
    (RMSNORM, {"tokens": 48, "hidden": 4096}, _rmsnorm_kernel, ("rank", "residual")),
    (MOE, {"tokens": 24, "top_k": 8, "hidden": 4096}, _moe_kernel, ("rank", "residual")),
    (FLUX_RS, {"m_per_rank": 64, "n": 512, "k_local": 512}, _gemm_rs_kernel, ("rank", "rows")),
]


@pytest.mark.parametrize("task_id,shape,kernel,drops", CASES, ids=[c[0] for c in CASES])
def test_tolerance_admits_both_kernels_rounding_and_rejects_wrong_sums(task_id: str, shape: dict, kernel,
                                                                       drops: tuple[str, ...]) -> None:
    task, glue = _glue(task_id)
    tolerance = task.manifest["tolerance"]
    eps = getattr(glue, "EPS", 0.0)
    for world_size in (2, 3, 8):
        ranks = _ranks(glue, shape, world_size, seed=world_size)
        rank = world_size - 1
        ref = glue.reference(ranks, rank)
        for a100 in (True, False):
            result = compare_outputs(kernel(ranks, rank, eps, a100), ref, tolerance)
            assert result.passed, (task_id, world_size, a100, result.message)
            assert result.rel_norm_err < 0.5 * tolerance["rel_norm_max"]
        for drop in drops:
            wrong = compare_outputs(kernel(ranks, rank, eps, False, drop), ref, tolerance)
            assert not wrong.passed, (task_id, world_size, drop)


def test_shared_buffers_hold_the_references_workspaces() -> None:
    signal_bytes = 2560  # vLLM's Signal (start/end flags of 36 blocks x 8 ranks, 36 counters), 128-aligned
    _, rms = _glue(RMSNORM)
    _, moe = _glue(MOE)
    for world_size in range(2, 9):
        for tokens in (1, 127, 128, 129, 8192):
            for hidden in (4096, 8192):
                shape = {"tokens": tokens, "hidden": hidden, "top_k": 8}
                data = 2 * tokens * hidden
                buffers, flags = rms.SHARED["buffers"](shape, world_size), rms.SHARED["flags"](shape, world_size)
                assert buffers >= 2 * data  # two-shot: the rank's copy, then the reduced slice for every rank
                if tokens <= 128:       # one-shot: 3 Lamport slots of world_size * tokens * hidden
                    assert buffers >= 3 * world_size * data
                assert flags >= signal_bytes + data  # vLLM: Signal, then the two-stage scratch
                assert flags >= 32768 + 4 * world_size and world_size * 256 * 4 <= 32768  # barrier flags, init slots
                if tokens <= 128:
                    assert moe.SHARED["buffers"](shape, world_size) >= 3 * world_size * data
                    assert moe.SHARED["flags"](shape, world_size) >= signal_bytes + data
    _, flux = _glue(FLUX_RS)
    per_tile_flags = 120 * 8  # GemmRS: every flag int becomes 8 PerTileFlags (120 bytes each)
    for world_size in range(2, 9):
        for m_per_rank, n in ((128, 4096), (1024, 8192)):
            shape = {"m_per_rank": m_per_rank, "n": n, "k_local": 512}
            m = m_per_rank * world_size
            tiles = (m // 128) * (n // 128)  # at most: both ops' tiles are at least 128 x 128
            assert flux.SHARED["buffers"](shape, world_size) >= 2 * m * n  # [world_size, m / ws, n] slots
            assert flux.SHARED["flags"](shape, world_size) >= 4096 + 2 * tiles * per_tile_flags  # sync, then flags


@pytest.mark.parametrize("task_id,shown,hidden_names", [
    (RMSNORM, ["fused_add_rms_norm_kernel", "cross_device_reduce_2stage"],
     ["trtllm_allreduce_fusion", "allreduce_fusion_kernel_oneshot_lamport", "LamportComm"]),
    (MOE, ["finalizeMoeRoutingKernel", "fused_add_rms_norm_kernel", "cross_device_reduce_1stage"],
     ["trtllm_moe_allreduce_fusion", "moefinalize_allreduce_fusion", "LamportComm"]),
    (FLUX_RS, ["class GemmV2ReduceScatter", "VisitorAuxStoreScatter", "CudaIpcBarrierAllKernel"],
     ["GemmV3ReduceScatter", "sm90_gemm_tma_warpspecialized_cooperative_reduce_scatter", "Sm90ReduceScatterDma"]),
])
def test_prompt_shows_the_a100_kernels_and_never_the_h100_reference(task_id: str, shown: list[str],
                                                                    hidden_names: list[str],
                                                                    cache_dir: Path) -> None:
    task = find_task(task_id, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    text = build_prompt(task, roots)
    for name in shown:
        assert name in text, name
    for name in hidden_names:
        assert name not in text, name
    assert task.manifest["entry"]["symbol"] in text
    first = next(iter(task.manifest["shapes"]))
    assert f'"{first}": {task.manifest["shapes"][first]["default"]}' in text


@pytest.mark.slow
def test_vllm_layernorm_compiles_against_the_torch_lite_shim(cache_dir: Path, tmp_path: Path) -> None:
    """layernorm_kernels.cu (torch wrappers included) with no libtorch, as both A100 adapters build it."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc (scripts/install/translation.sh installs it)")
    task = find_task(RMSNORM, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    cmd = [nvcc, "-c", "-std=c++20", "-O0", "-gencode", "arch=compute_90,code=sm_90",
           f"-I{TRANSLATION / 'common' / 'torch_lite'}", f"-I{roots['vllm'] / 'csrc'}",
           str(roots["vllm"] / "csrc" / "layernorm_kernels.cu"), "-o", str(tmp_path / "layernorm.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
