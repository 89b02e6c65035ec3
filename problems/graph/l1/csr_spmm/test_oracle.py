"""The oracle's nonzero-balanced chunks on the CPU interpreter with chunks far smaller than its
rows (hub rows over many chunks, empty rows at both ends, rows ending exactly at a chunk end),
and its kernels compiled offline for sm_90 with the GPU tile sizes (no GPU needed)."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
pytestmark = pytest.mark.filterwarnings("ignore:Sparse")
SHARED_MEMORY_SM90 = 232448


def load_oracle():
    spec = importlib.util.spec_from_file_location("spmm_oracle", Path(__file__).parent / "solutions" / "oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_csr(lengths: list[int], gen: torch.Generator):
    n = len(lengths)
    rowptr = torch.zeros(n + 1, dtype=torch.int32)
    rowptr[1:] = torch.cumsum(torch.tensor(lengths), 0)
    col = torch.cat([torch.randperm(n, generator=gen)[:length].sort().values for length in lengths]).int()
    return rowptr, col, torch.rand(col.numel(), generator=gen) * 2 - 1


def check_rows_across_chunk_boundaries(chunk: int) -> None:
    """Run in a process started with TRITON_INTERPRET=1 (Triton reads it when it is imported)."""
    oracle = load_oracle()
    oracle.launch_tiles = lambda feat, on_gpu: dict(CHUNK=chunk, BLOCK_F=16)
    gen = torch.Generator().manual_seed(chunk)
    lengths = [0, 3, 0, 0, 45, 1, 1, 16, 0, 2, 5, 8, 17, 0] + [0] * 36 + [50, 0]  # 152 nonzeros
    rowptr, col, val = random_csr(lengths, gen)
    for feat in (13, 40):  # feature tails, and several feature blocks
        X = torch.randn(len(lengths), feat, generator=gen)
        expected = case.problem.module.Model()(rowptr, col, val, X)
        torch.testing.assert_close(oracle.ModelNew()(rowptr, col, val, X), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk", [8, 16])
def test_rows_across_chunk_boundaries(chunk):
    repo = Path(__file__).resolve().parents[4]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo)}
    run = subprocess.run([sys.executable, __file__, str(chunk)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]


def test_kernels_fit_sm90():
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    oracle = load_oracle()
    target = GPUTarget("cuda", 90, 32)
    for feat in (case.manifest["shapes"]["feat"]["default"], case.manifest["shapes"]["feat"]["min"]):
        tiles = oracle.launch_tiles(feat, on_gpu=True)
        constexprs = {"CHUNK": tiles["CHUNK"], "BLOCK_F": tiles["BLOCK_F"]}
        signature = {"rowptr": "*i32", "ends": "*i32", "chunk_row": "*i32", "col": "*i32", "val": "*fp32",
                     "x": "*fp32", "y": "*fp32", "nnz": "i32", "feat": "i32", "n_chunks": "i32",
                     "CHUNK": "constexpr", "BLOCK_F": "constexpr"}
        kernel = triton.compile(ASTSource(fn=oracle._spmm_chunks, signature=signature, constexprs=constexprs),
                                target=target, options={"num_warps": tiles["num_warps"]})
        assert kernel.metadata.shared <= SHARED_MEMORY_SM90, (feat, tiles, kernel.metadata.shared)


if __name__ == "__main__":
    check_rows_across_chunk_boundaries(int(sys.argv[1]))
