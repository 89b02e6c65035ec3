"""The glue of tr-flux-ag-gemm (Flux all-gather + GEMM, multi-GPU), checked on a CPU.

The reference against explicit index arithmetic over the gathered rows, the manifest's
tolerance against a CPU emulation of both upstream kernels' arithmetic (fp32 products,
one bf16 rounding: it must pass; a kernel that skips a rank's rows, gathers them in the
wrong order or uses a peer's weight must not), the shared buffers against what Flux's
AGKernel allocates, and the prompt (A100 sources shown, the H100 kernel never). The
kernels run on the GPU machine (scripts/gpu/translation_verify_multi.sh); the compile of
both sides is the slow test at the end.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from orchestrator.config import REPO_ROOT
from orchestrator.runner.compare import compare_outputs
from orchestrator.runner.problem import import_file
from orchestrator.translation import sources
from orchestrator.translation.catalog import find_task
from orchestrator.translation.prompts import build_prompt

TRANSLATION = REPO_ROOT / "translation"
TASK_ID = "tr-flux-ag-gemm"
BF16 = torch.bfloat16


def _glue() -> tuple[Any, Any]:
    task = find_task(TASK_ID, TRANSLATION)
    return task, import_file(task.file("task.py"), "test_flux_ag_glue")


def _ranks(glue: Any, shape: dict[str, Any], world_size: int, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    return [glue.get_inputs(shape, torch.Generator().manual_seed(seed * 1000 + r), "cpu", rank=r,
                            world_size=world_size) for r in range(world_size)]


def test_reference_is_the_gathered_rows_times_this_ranks_weight() -> None:
    _, glue = _glue()
    world_size, shape = 3, {"m_per_rank": 2, "n": 5, "k": 4}
    ranks = _ranks(glue, shape, world_size)
    assert ranks[0][0].shape == (2, 4) and ranks[0][1].shape == (5, 4) and ranks[0][2].shape == (6, 5)
    assert glue.OUTPUTS == (2,) and all(torch.isnan(out).all() for *_, out in ranks)
    assert not torch.equal(ranks[0][0], ranks[1][0]) and not torch.equal(ranks[0][1], ranks[1][1])
    for rank in range(world_size):
        ref = glue.reference(ranks, rank)
        assert ref.shape == (6, 5) and ref.dtype == BF16
        for row in range(6):
            owner, local = divmod(row, 2)  # row `row` of the full A is row `local` of rank `owner`'s A
            for j in range(5):
                want = sum(ranks[owner][0][local, p].item() * ranks[rank][1][j, p].item() for p in range(4))
                assert abs(ref[row, j].item() - want) <= 1e-2 * (1 + abs(want))


def _kernel(ranks: list, rank: int, wrong: str = "") -> torch.Tensor:
    """Both Flux kernels: bf16 operands, fp32 accumulation, one bf16 rounding of the output."""
    blocks = [a.float() for a, _, _ in ranks]
    if wrong == "stale_rank":    # a peer's rows never arrived: its slot of the buffer still zero
        blocks[(rank + 1) % len(ranks)] = torch.zeros_like(blocks[0])
    if wrong == "order":         # slots filled in the wrong order
        blocks = blocks[1:] + blocks[:1]
    weight = ranks[(rank + 1) % len(ranks)][1] if wrong == "weight" else ranks[rank][1]
    return (torch.cat(blocks) @ weight.float().T).to(BF16)


def test_tolerance_admits_the_kernels_rounding_and_rejects_wrong_gathers() -> None:
    task, glue = _glue()
    tolerance = task.manifest["tolerance"]
    shape = {"m_per_rank": 64, "n": 256, "k": 1024}
    for world_size in (2, 3, 8):
        ranks = _ranks(glue, shape, world_size, seed=world_size)
        rank = world_size - 1
        ref = glue.reference(ranks, rank)
        result = compare_outputs(_kernel(ranks, rank), ref, tolerance)
        assert result.passed, (world_size, result.message)
        assert result.rel_norm_err < 0.5 * tolerance["rel_norm_max"]
        for wrong in ("stale_rank", "order", "weight"):
            assert not compare_outputs(_kernel(ranks, rank, wrong), ref, tolerance).passed, (world_size, wrong)


def test_shared_buffers_hold_what_flux_allocates() -> None:
    _, glue = _glue()
    flags_offset, max_num_signal = 4096, 64  # the adapters' layout; Flux's AGKernel: MAX_NUM_SIGNAL int32 flags
    for world_size in range(2, 9):
        for m_per_rank, n, k in ((128, 1024, 4096), (1024, 3584, 12288)):
            shape = {"m_per_rank": m_per_rank, "n": n, "k": k}
            m = m_per_rank * world_size
            assert glue.SHARED["buffers"](shape, world_size) >= 2 * m * k  # the gathered A, [m, k] bf16
            signals = glue.SHARED["signals"](shape, world_size)
            assert 4 * world_size <= flags_offset  # barrier-all slots: one int32 per rank
            assert signals >= flags_offset + 4 * max_num_signal and world_size <= max_num_signal


def test_prompt_shows_the_a100_kernel_and_never_the_h100_reference(cache_dir: Path) -> None:
    task = find_task(TASK_ID, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    text = build_prompt(task, roots)
    for name in ("class GemmV2AGKernel", "AGThreadblockSwizzleStreamKRankOffset", "CudaIpcBarrierAllKernel",
                 "Sm80AGGemmWithEpilogueVisitorStreamk", "cuStreamWriteValue32"):
        assert name in text, name
    for name in ("GemmV3AGKernel", "Sm90AGKernelTileScheduler", "Sm90AGGemmUniversal",
                 "sm90_all_gather_gemm_tma_warpspecialized_cooperative", "sm90_all_gather_gemm_tile_scheduler"):
        assert name not in text, name
    assert task.manifest["entry"]["symbol"] in text
    assert '"m_per_rank": 512' in text


@pytest.mark.slow
def test_both_sides_compile(cache_dir: Path) -> None:
    """Both adapters with nvcc 13 (about 2 and 4 minutes on 2 cores; cached afterwards)."""
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc (scripts/install/translation.sh installs it)")
    from orchestrator.translation import builds
    task = find_task(TASK_ID, TRANSLATION)
    roots = sources.prepare(task.manifest, cache_dir)
    for side in ("a100", "h100"):
        result = builds.build(task, side, roots, cache_dir)  # raises BuildError with the log on failure
        assert result.ok and result.library is not None and result.library.is_file(), side
