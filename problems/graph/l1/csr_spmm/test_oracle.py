"""The oracle's nonzero-balanced programs on the CPU interpreter with programs far smaller than its
rows (hub rows over many programs, empty rows at both ends, rows ending exactly at a tile end),
through both the GPU's segmented scan and the interpreter's float64 prefix differences, and every
autotuning config compiled offline for sm_90 (no GPU needed)."""
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


def check_rows_across_programs(chunk: int, segmented_scan: bool) -> None:
    """Run in a process started with TRITON_INTERPRET=1 (Triton reads it when it is imported)."""
    oracle = load_oracle()
    oracle.launch_tiles = lambda feat, on_gpu: dict(CHUNK=chunk, BLOCK_F=16)  # tiles of chunk // 4
    oracle.INTERPRETER_SEGMENTED_SCAN = segmented_scan
    gen = torch.Generator().manual_seed(chunk)
    lengths = [0, 3, 0, 0, 45, 1, 1, 16, 0, 2, 5, 8, 17, 0] + [0] * 36 + [50, 0]  # 152 nonzeros
    rowptr, col, val = random_csr(lengths, gen)
    for feat in (13, 40, 32):  # feature tails, several feature blocks, and none (EVEN_F)
        X = torch.randn(len(lengths), feat, generator=gen)
        expected = case.problem.module.Model()(rowptr, col, val, X)
        torch.testing.assert_close(oracle.ModelNew()(rowptr, col, val, X), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk,segmented_scan", [(8, False), (16, False), (8, True), (16, True)])
def test_rows_across_programs(chunk, segmented_scan):
    repo = Path(__file__).resolve().parents[4]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo)}
    run = subprocess.run([sys.executable, __file__, str(chunk), str(int(segmented_scan))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]


def test_every_config_fits_sm90():
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    oracle = load_oracle()
    target = GPUTarget("cuda", 90, 32)
    signature = {"bounds": "*i32", "first_key": "*i32", "start_key": "*i32", "col": "*i32", "val": "*fp32",
                 "x": "*fp32", "y": "*fp32", "feat": "i32", "n_feature_blocks": "i32", "row_len_class": "i32",
                 "BLOCK_NNZ": "constexpr", "BLOCK_F": "constexpr", "EVEN_F": "constexpr", "SEGMENTED_SCAN": "constexpr"}
    for feat in (case.manifest["shapes"]["feat"]["default"], case.manifest["shapes"]["feat"]["min"]):
        block_f = oracle.launch_tiles(feat, on_gpu=True)["BLOCK_F"]
        for config in oracle._configs(block_f):
            constexprs = {**config.kwargs, "BLOCK_F": block_f, "EVEN_F": feat % block_f == 0, "SEGMENTED_SCAN": True}
            kernel = triton.compile(ASTSource(fn=oracle._spmm_segments, signature=signature, constexprs=constexprs),
                                    target=target, options={"num_warps": config.num_warps, "num_stages": 1})
            assert kernel.metadata.shared <= SHARED_MEMORY_SM90, (feat, config, kernel.metadata.shared)


if __name__ == "__main__":
    check_rows_across_programs(int(sys.argv[1]), bool(int(sys.argv[2])))
