"""The oracle's message kernel fits sm_90 shared memory at every feature width the manifest allows
(three pipeline stages at feat 128 needed 288 KiB on the H200, over the 227 KiB limit). Compiled
offline for sm_90: no GPU needed."""
import importlib.util
from pathlib import Path

import pytest
import torch
import triton

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
SHARED_MEMORY_SM90 = 232448


def load_oracle():
    spec = importlib.util.spec_from_file_location("mpnn_oracle", Path(__file__).parent / "solutions" / "oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("feat", [case.manifest["shapes"]["feat"]["max"], 64])
def test_message_kernel_fits_sm90_shared_memory(feat):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    oracle = load_oracle()
    fp = max(16, triton.next_power_of_2(feat))
    launch = oracle.message_launch(fp, on_gpu=True)
    constexprs = {"FP": fp, "H": oracle.EDGE_HIDDEN, "BE": launch["BE"], "KC": launch["KC"]}
    signature = {"z": "*fp32", "h": "*fp32", "src": "*i64", "dst": "*i64", "w2": "*fp32", "b2": "*fp32",
                 "m": "*fp32", "n_edges": "i32", "feat": "i32", **{k: "constexpr" for k in constexprs}}
    kernel = triton.compile(ASTSource(fn=oracle._messages, signature=signature, constexprs=constexprs),
                            target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": launch["num_warps"], "num_stages": launch["num_stages"]})
    assert kernel.metadata.shared <= SHARED_MEMORY_SM90, (feat, launch, kernel.metadata.shared)
    assert launch["num_stages"] >= 2  # still software-pipelined


def test_tf32_rounding_is_to_nearest_ties_away():
    """The oracle feeds the tensor cores operands already rounded to nearest: the mma's own
    conversion truncates (13 low mantissa bits dropped), which drifted 3.25e-3 over 6 steps on the H200."""
    oracle = load_oracle()
    ulp = 2.0 ** -10  # TF32 spacing in [1, 2)
    x = torch.tensor([1.0, 1 + 0.49 * ulp, 1 + 0.5 * ulp, 1 + 0.51 * ulp, -(1 + 0.5 * ulp), 3.0 + 0.7 * 2 * ulp])
    expected = torch.tensor([1.0, 1.0, 1 + ulp, 1 + ulp, -(1 + ulp), 3.0 + 2 * ulp])
    assert torch.equal(oracle.round_tf32(x), expected)
    y = torch.randn(10000, generator=torch.Generator().manual_seed(0)) * 100
    r = oracle.round_tf32(y)
    assert bool(((r.view(torch.int32) & 0x1FFF) == 0).all())
    assert float(((r - y).abs() / y.abs()).max()) <= 2.0 ** -11 * 1.0001  # half a TF32 ulp, relative
