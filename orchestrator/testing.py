"""Checks every problem's own tests call: degeneracy, calibration, structure.

A problem folder's `test_reference.py` cross-checks the reference against an
independent implementation (its own code) and calls these shared checks:

    from orchestrator.testing import ProblemCase
    case = ProblemCase.load(__file__)
    def test_degeneracy():
        case.check_degeneracy(case.small_shape())

They run on the CPU at small shapes in CI.
"""
from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from orchestrator.runner.compare import as_tuple, zeros_like_output
from orchestrator.runner.problem import LoadedProblem, cast_floats, load_problem, to_device
from orchestrator.runner.shapes import Shape, boundary_shape, default_shape, satisfies, stress_shapes


def _perturb(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    noise = torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)
    scale = t.abs().mean().clamp_min(1e-3) * 0.1
    return t + noise * scale


@dataclass
class ProblemCase:
    problem: LoadedProblem

    @classmethod
    def load(cls, test_file: str | Path) -> "ProblemCase":
        return cls(load_problem(Path(test_file).resolve().parent))

    @property
    def manifest(self) -> dict[str, Any]:
        return self.problem.manifest

    @property
    def tolerance(self) -> dict[str, Any]:
        return dict(self.manifest["tolerance"])

    def small_shape(self) -> Shape:
        return default_shape(self.manifest["shapes"], "cpu")

    def min_shape(self) -> Shape:
        shape = {k: (s["min"] if s.get("type", "int") != "choice" else s["choices"][0])
                 for k, s in self.manifest["shapes"].items()}
        assert not satisfies(shape, self.manifest.get("constraints", [])), "minimum shape violates constraints"
        return shape

    def gpu_stress_shapes(self, seeds: int = 50) -> list[Shape]:
        """Shapes an H200 evaluation can draw: the upper boundary (20 draws) and 8 stress shapes for
        each of `seeds` seeds, for tests that bound a cost (host memory, output size) over them."""
        params, constraints = self.manifest["shapes"], self.manifest.get("constraints", [])
        shapes = [boundary_shape(params, constraints, "max", "cuda", seed) for seed in range(20)]
        return shapes + [s for seed in range(seeds) for s in stress_shapes(params, constraints, 8, seed, "cuda")]

    def run(self, shape: Shape, seed: int = 0, dtype: torch.dtype | None = None) -> tuple[tuple[Any, ...], Any]:
        """Inputs and reference output at `shape` (optionally with floats cast to `dtype`)."""
        inputs = self.problem.inputs(shape, seed, "cpu")
        init = self.problem.init_inputs(shape)
        if dtype is not None:
            inputs, init = cast_floats(inputs, dtype), cast_floats(init, dtype)
        model = self.problem.module.Model(**init).eval()
        with torch.no_grad():
            return inputs, model(*inputs)

    def check_degeneracy(self, shape: Shape, perturbable: list[int] | None = None,
                         init_perturbable: list[str] | None = None) -> None:
        """The output depends on every (perturbable) input, changes with the seed, and a zero
        output does not pass the tolerance."""
        inputs, ref = self.run(shape, seed=1)
        assert not self.problem.compare(inputs, zeros_like_output(ref), ref).passed, \
            "an all-zero output passes the tolerance"
        _, other = self.run(shape, seed=2)
        assert not _same_structure(other, ref) or not self.problem.compare(inputs, other, ref).passed, \
            "output is the same for two seeds"
        gen = torch.Generator().manual_seed(3)
        model = self.problem.module.Model(**self.problem.init_inputs(shape)).eval()
        float_inputs = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        for i in (perturbable if perturbable is not None else float_inputs):
            changed = list(inputs)
            changed[i] = _perturb(inputs[i], gen)
            with torch.no_grad():
                out = model(*changed)
            assert not self.problem.compare(inputs, out, ref).passed, f"output does not depend on input {i}"
        init = self.problem.init_inputs(shape)
        names = init_perturbable if init_perturbable is not None else [
            k for k, v in init.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
        for name in names:
            changed_init = dict(init)
            changed_init[name] = _perturb(init[name], gen)
            with torch.no_grad():
                out = self.problem.module.Model(**changed_init).eval()(*inputs)
            assert not self.problem.compare(inputs, out, ref).passed, f"output does not depend on init input {name!r}"

    def drift(self, shape: Shape, seed: int = 0) -> tuple[float, float]:
        """fp32-vs-fp64 drift of the reference: (max abs error, relative norm error)."""
        _, ref32 = self.run(shape, seed)
        _, ref64 = self.run(shape, seed, dtype=torch.float64)
        worst_abs, worst_rel = 0.0, 0.0
        for a, b in zip(as_tuple(ref32), as_tuple(ref64)):
            if not a.is_floating_point():
                continue
            d = (a.double() - b.double()).abs()
            worst_abs = max(worst_abs, float(d.max()) if d.numel() else 0.0)
            denom = float(b.double().norm())
            worst_rel = max(worst_rel, float(d.norm()) / denom if denom else 0.0)
        return worst_abs, worst_rel

    def fp32_and_fp64(self, shape: Shape, seed: int = 0) -> tuple[tuple[Any, ...], Any, Any]:
        """Inputs, the fp32 reference output, and the fp64 one cast to fp32's dtypes (to judge the first)."""
        inputs, ref32 = self.run(shape, seed)
        _, ref64 = self.run(shape, seed, dtype=torch.float64)
        cast = tuple(b.to(a.dtype) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else b
                     for a, b in zip(as_tuple(ref32), as_tuple(ref64)))
        return inputs, ref32, cast if isinstance(ref32, (tuple, list)) else cast[0]

    def check_calibration(self, shape: Shape, seed: int = 0) -> None:
        """The fp32 reference passes its own tolerance against the fp64 reference."""
        inputs, ref32, ref64 = self.fp32_and_fp64(shape, seed)
        result = self.problem.compare(inputs, ref32, ref64)
        assert result.passed, f"fp32 reference fails its tolerance against fp64: {result.message}"

    def check_recorded_drift(self, measured: float, key: str = "fp32_vs_fp64_max_abs") -> None:
        """The drift a test measured (fp32 against fp64) is not above 4x what the manifest's
        calibration records (the largest seen over ranks and world sizes). With
        POPCORN_RECORD_DRIFT=FILE the largest value per problem and key is written to FILE
        instead, to be copied into the manifests (`calibration.<key>`)."""
        out = os.environ.get("POPCORN_RECORD_DRIFT")
        if out:
            path = Path(out)
            seen = json.loads(path.read_text()) if path.exists() else {}
            entry = seen.setdefault(self.manifest["id"], {})
            entry[key] = max(float(measured), entry.get(key, 0.0))
            path.write_text(json.dumps(seen, indent=1, sort_keys=True))
            return
        recorded = self.manifest["tolerance"].get("calibration", {}).get(key)
        assert recorded is not None, f"{self.manifest['id']}: tolerance.calibration.{key} is not recorded " \
                                     f"(measured {measured:.3g}; POPCORN_RECORD_DRIFT=FILE collects it)"
        assert measured <= recorded * 4 + 1e-12, \
            f"{self.manifest['id']}: measured drift {measured:.3g}, the manifest records {recorded:.3g}"

    def check_against(self, shape: Shape, independent: Callable[..., Any], seed: int = 0) -> None:
        """The reference agrees with an independent implementation (given the same inputs)."""
        inputs, ref = self.run(shape, seed)
        expected = independent(*inputs, **self.problem.init_inputs(shape))
        result = self.problem.compare(inputs, _like(expected, ref), ref)
        assert result.passed, f"reference disagrees with the independent implementation: {result.message}"


def _same_structure(a: Any, b: Any) -> bool:
    ta, tb = as_tuple(a), as_tuple(b)
    return len(ta) == len(tb) and all(x.shape == y.shape for x, y in zip(ta, tb))


def _like(expected: Any, ref: Any) -> Any:
    outs = tuple(torch.as_tensor(e).to(r.dtype) for e, r in zip(as_tuple(expected), as_tuple(ref)))
    return outs if isinstance(ref, (tuple, list)) else outs[0]


__all__ = ["ProblemCase", "to_device"]


def load_script(path: str | Path, name: str) -> Any:
    """A script under scripts/ imported as a module, for tests of its functions."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
