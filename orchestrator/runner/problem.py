"""Loading a problem folder (manifest.json + reference.py) and calling its contract.

The contract a problem author writes:

    class Model(torch.nn.Module)            # forward(*inputs) -> Tensor | tuple[Tensor, ...]
    def get_init_inputs(shape) -> dict      # keyword arguments of Model(...) (weights as tensors)
    def get_inputs(shape, generator, device) -> tuple
    def tolerance_scale(inputs, output) -> Tensor | tuple   # optional, see compare.py
    def check_output(inputs, output, expected, tolerance) -> (bool, str)   # optional

`check_output` replaces the manifest's metric for problems whose correct answer is not
unique (neighbour ties, iterative solvers judged by their residual, contact sets): it
receives the inputs, the candidate's output (already structure-checked), the reference
output and the manifest's tolerance, and says whether the output is acceptable and why.
All of its tensors are on one device, the reference output's (cuda when scored on a GPU).

`generator` is a CPU torch.Generator seeded by the harness, so the same seed gives
the same inputs on every device. Collectives problems also take `rank` and
`world_size` keywords in get_inputs.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from orchestrator.runner.compare import Comparison, compare_outputs, compare_structure
from orchestrator.runner.shapes import Shape


@dataclass(frozen=True)
class LoadedProblem:
    directory: Path
    manifest: dict[str, Any]
    module: ModuleType

    @property
    def id(self) -> str:
        return str(self.manifest["id"])

    def init_inputs(self, shape: Shape) -> dict[str, Any]:
        fn = getattr(self.module, "get_init_inputs", None)
        return dict(fn(dict(shape))) if fn else {}

    def inputs(self, shape: Shape, seed: int, device: str, **extra: Any) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
        out = self.module.get_inputs(dict(shape), gen, device, **extra)
        return tuple(out)

    def tolerance_scale(self, inputs: tuple[Any, ...], output: Any) -> Any:
        """Optional per-element error scale (reference.tolerance_scale), else None."""
        fn = getattr(self.module, "tolerance_scale", None)
        return fn(inputs, output) if fn else None

    def compare(self, inputs: tuple[Any, ...], output: Any, expected: Any,
                tol: dict[str, Any] | None = None) -> Comparison:
        """Judge `output` against the reference output `expected` for these inputs, under the
        manifest's tolerance or `tol` (scripts/tolerance_sweep.py tries half of it)."""
        tol = self.manifest["tolerance"] if tol is None else tol
        check = getattr(self.module, "check_output", None)
        if check is None:
            return compare_outputs(output, expected, tol, self.tolerance_scale(inputs, expected))
        shape_ok = compare_structure(output, expected, same_length=False)  # the checker judges set sizes
        if not shape_ok.passed:
            return shape_ok
        device = first_tensor_device(expected)
        if device is not None:  # the candidate's output comes back on the CPU: one device for the checker
            inputs, output = to_device(inputs, device), to_device(output, device)
        try:
            passed, message = check(inputs, output, expected, tol)
        except Exception as exc:  # an output the checker cannot even read is not a correct one
            return Comparison(False, f"check_output could not judge the output: {type(exc).__name__}: {exc}")
        return Comparison(bool(passed), f"check_output: {message}")

    def model(self, shape: Shape, device: str) -> torch.nn.Module:
        init = to_device(self.init_inputs(shape), device)
        return self.module.Model(**init).to(device).eval()


def import_file(path: str | Path, prefix: str) -> ModuleType:
    """Import a Python file under a unique module name (two problems never collide)."""
    path = Path(path)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"{prefix}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_problem(directory: str | Path) -> LoadedProblem:
    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    module = import_file(directory / "reference.py", "popcorn_reference")
    return LoadedProblem(directory, manifest, module)


def to_device(obj: Any, device: str | torch.device) -> Any:
    """Move every tensor inside tuples/lists/dicts to `device`."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(to_device(o, device) for o in obj)
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def first_tensor_device(obj: Any) -> torch.device | None:
    if isinstance(obj, torch.Tensor):
        return obj.device
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (tuple, list)) else ()
    for item in items:
        device = first_tensor_device(item)
        if device is not None:
            return device
    return None


def cast_floats(obj: Any, dtype: torch.dtype) -> Any:
    """Cast every floating tensor to `dtype` (for fp32-vs-fp64 calibration)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, tuple):
        return tuple(cast_floats(o, dtype) for o in obj)
    if isinstance(obj, list):
        return [cast_floats(o, dtype) for o in obj]
    if isinstance(obj, dict):
        return {k: cast_floats(v, dtype) for k, v in obj.items()}
    return obj


def clone_tree(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, (tuple, list)):
        return type(obj)(clone_tree(o) for o in obj)
    if isinstance(obj, dict):
        return {k: clone_tree(v) for k, v in obj.items()}
    return obj


def tree_digest(obj: Any, key: bytes) -> list[Any]:
    """A keyed digest of every tensor in a tree (shape, dtype, BLAKE2b of its bytes under `key`),
    other leaves as they are. The candidate's process reports this of its inputs after a call, and
    the judge compares it with its own: the mutation check without sending the inputs back."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").reshape(-1).contiguous()
        data = t.view(torch.uint8).numpy() if t.numel() else b""
        return [tuple(obj.shape), str(obj.dtype), hashlib.blake2b(data, key=key, digest_size=16).hexdigest()]
    if isinstance(obj, (tuple, list)):
        return [tree_digest(o, key) for o in obj]
    if isinstance(obj, dict):
        return [[k, tree_digest(v, key)] for k, v in sorted(obj.items())]
    return [obj]


def tree_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (tuple, list)):
        return sum(tree_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(tree_bytes(v) for v in obj.values())
    return 0
