"""The oracle's kernel launch goes through Triton's GPU path offline: arguments bound by the
launcher's generated binder (with the CUDA backend's specialisation: integers equal to 1 become
constexprs), then compiled for sm_90. On the H200 the binder failed with "failed to specialize
argument of type: dict" (a kernel argument named `params` was shadowed by the binder's own dict);
the CPU interpreter never runs that binder, so only this test sees it without a GPU."""
import importlib.util
from pathlib import Path

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime.jit import create_function_from_signature

SHARED_MEMORY_SM90 = 232448


def load_oracle():
    spec = importlib.util.spec_from_file_location("ess_oracle", Path(__file__).parent / "solutions" / "oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_as_gpu_launch(kernel, args, meta, arch=90):
    """What JITFunction.run does before it needs a device: bind, specialise, pack, compile."""
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*args, **meta)
    options, signature, constexprs, attrs = kernel._pack_args(backend, dict(meta), bound, specialization, options)
    return triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options.__dict__)


@pytest.mark.parametrize("chains", [4, 1])  # one chain: `chains` is specialised to the constant 1
def test_ess_kernel_binds_and_compiles_for_sm90(chains):
    oracle = load_oracle()
    draws = torch.zeros(1000, chains, 1000)
    grid, args, meta = oracle.ess_launch(draws, torch.empty(1000), on_gpu=True)
    assert grid == (1000,)
    kernel = compile_as_gpu_launch(oracle._ess, args, meta)
    assert kernel.metadata.shared <= SHARED_MEMORY_SM90
