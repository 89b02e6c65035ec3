"""The oracle's _step_norms kernel fits sm_90 shared memory at the largest state count the manifest
allows (its [KP, 64] tiles of A^T needed 416 KiB at K = 512). Compiled offline for sm_90: no GPU."""
import importlib.util
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
SHARED_MEMORY_SM90 = 232448


def load_oracle():
    spec = importlib.util.spec_from_file_location("hmm_oracle", Path(__file__).parent / "solutions" / "oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_step_norms_fits_sm90_shared_memory_at_max_states():
    oracle = load_oracle()
    kp = triton.next_power_of_2(case.manifest["shapes"]["n_states"]["max"])
    constexprs = {"BT": 16, "KP": kp, "BI": oracle.step_norms_block(kp)}
    pointers = ["alpha", "beta", "log_A", "log_B", "obs", "m1", "m2", "s"]
    signature = {**{name: "*fp32" for name in pointers}, "obs": "*i64", "seq_len": "i32", "K": "i32", "V": "i32",
                 **{name: "constexpr" for name in constexprs}}
    kernel = triton.compile(ASTSource(fn=oracle._step_norms, signature=signature, constexprs=constexprs),
                            target=GPUTarget("cuda", 90, 32))
    assert kernel.metadata.shared <= SHARED_MEMORY_SM90, (constexprs, kernel.metadata.shared)
