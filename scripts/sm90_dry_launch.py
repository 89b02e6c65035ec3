"""Compile an oracle's Triton kernels for sm_90 on a machine without a GPU.

Every Triton launch of the oracle's forward is bound and specialised the way Triton's own
launcher does it on a GPU (integer arguments equal to 1 become constants, argument names go
through the generated binder), then compiled for sm_90 instead of run. This catches what the
CPU interpreter lets through and the H100/H200 refuses: module globals that are not
tl.constexpr, list comprehensions in @triton.jit, argument names that clash with the launcher,
and shared memory above the 227 KiB per block of sm_90. The kernels do not run, so host code
after a launch sees unwritten outputs: a data-dependent loop may misbehave (use --timeout).

    python scripts/sm90_dry_launch.py PROBLEM_ID [key=value ...]   (default: the CPU default shape)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.pop("TRITON_INTERPRET", None)  # compile for real, not interpret

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.compiler import make_backend  # noqa: E402
from triton.runtime.jit import JITFunction, create_function_from_signature  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_LIMIT = 232448  # bytes of shared memory per block on sm_90
TARGET = GPUTarget("cuda", 90, 32)
compiled: dict[tuple, int] = {}


def compile_instead_of_run(self: JITFunction, *args, grid, warmup, **kwargs):
    backend = make_backend(TARGET)
    binder = create_function_from_signature(self.signature, self.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
    key = (self.fn.__name__, str(signature), str(constexprs), str(attrs))
    if key not in compiled:
        t0 = time.time()
        kernel = triton.compile(ASTSource(self, signature, constexprs, attrs), target=TARGET,
                                options=options.__dict__)
        compiled[key] = kernel.metadata.shared
        verdict = "OVER THE LIMIT" if kernel.metadata.shared > SHARED_LIMIT else "ok"
        print(f"{self.fn.__name__}: shared {kernel.metadata.shared} B ({verdict}), warps "
              f"{kernel.metadata.num_warps}, stages {options.num_stages} ({time.time() - t0:.1f} s)", flush=True)
    return None


def pretend_to_be_an_h100() -> None:
    """The oracle takes its GPU path, asks for the GPU's properties and reads outputs its kernels
    never wrote: zeros (valid indices) rather than torch.empty's garbage."""
    JITFunction.run = compile_instead_of_run
    torch.Tensor.is_cuda = property(lambda self: True)
    props = SimpleNamespace(name="NVIDIA H100 (dry launch)", multi_processor_count=132, major=9, minor=0,
                            total_memory=80 << 30, L2_cache_size=50 << 20, warp_size=32,
                            shared_memory_per_block_optin=SHARED_LIMIT, max_threads_per_multi_processor=2048)
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.synchronize = lambda *a, **k: None
    empty, empty_like = torch.empty, torch.empty_like
    torch.empty = lambda *a, **k: empty(*a, **k).zero_()
    torch.empty_like = lambda *a, **k: empty_like(*a, **k).zero_()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problem", help="problem id, e.g. graph/l1/csr_spmv")
    parser.add_argument("shape", nargs="*", help="key=value overrides of the CPU default shape")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from orchestrator.runner.problem import load_problem
    from orchestrator.runner.shapes import default_shape

    folder = REPO / "problems" / args.problem
    problem = load_problem(folder)
    shape = {**default_shape(problem.manifest["shapes"], "cpu"),
             **{k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.shape)}}
    spec = importlib.util.spec_from_file_location("oracle_under_test", folder / "solutions" / "oracle.py")
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    pretend_to_be_an_h100()
    inputs = problem.inputs(shape, 0, "cpu")
    model = oracle.ModelNew(**problem.init_inputs(shape))
    with torch.no_grad():
        model(*inputs)
    over = [k[0] for k, v in compiled.items() if v > SHARED_LIMIT]
    print(f"{args.problem} at {shape}: {len(compiled)} kernel variant(s) compiled for sm_90"
          + (f"; over the shared-memory limit: {', '.join(over)}" if over else ""))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
