"""`calibrate`: a reference's fp32-vs-fp64 drift at a shape, against its tolerance.

Runs the reference twice on the same inputs, once with every floating tensor cast to
float64, and prints the worst absolute error, the relative norm error and (where the
reference defines tolerance_scale) the worst error relative to the scale, next to the
manifest's tolerance. Problem authors set the tolerance about 10x above the drift.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from orchestrator.errors import UserError


def parse_shape(text: str, params: dict[str, Any]) -> dict[str, Any]:
    from orchestrator.runner.shapes import default_shape

    if text in ("default", "cpu_default"):
        return default_shape(params, "cpu" if text == "cpu_default" else "cuda")
    if text in ("min", "max"):
        return {k: (s[text] if s.get("type", "int") != "choice" else s["choices"][0 if text == "min" else -1])
                for k, s in params.items()}
    shape = default_shape(params, "cpu")
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key not in params:
            raise UserError(f"--shape: unknown parameter {key!r} (known: {', '.join(params)})")
        shape[key] = json.loads(value)
    return shape


def drift(problem: Any, shape: dict[str, Any], device: str, seed: int = 0) -> dict[str, float]:
    import torch

    from orchestrator.runner.compare import as_tuple
    from orchestrator.runner.problem import cast_floats, to_device

    inputs = problem.inputs(shape, seed, "cpu")
    init = problem.init_inputs(shape)
    outs = []
    for dtype in (None, torch.float64):
        i, k = (inputs, init) if dtype is None else (cast_floats(inputs, dtype), cast_floats(init, dtype))
        model = problem.module.Model(**to_device(k, device)).to(device).eval()
        with torch.no_grad():
            outs.append(to_device(model(*to_device(i, device)), "cpu"))
    scale = problem.tolerance_scale(cast_floats(inputs, torch.float64), outs[1])
    scales = as_tuple(scale) if scale is not None else (None,) * len(as_tuple(outs[1]))
    worst = {"max_abs": 0.0, "rel_norm": 0.0, "max_err_over_scale": 0.0}
    for a, b, s in zip(as_tuple(outs[0]), as_tuple(outs[1]), scales):
        if not a.is_floating_point():
            continue
        d = (a.double() - b.double()).abs()
        worst["max_abs"] = max(worst["max_abs"], float(d.max()) if d.numel() else 0.0)
        denom = float(b.double().norm())
        worst["rel_norm"] = max(worst["rel_norm"], float(d.norm()) / denom if denom else 0.0)
        if s is not None:
            worst["max_err_over_scale"] = max(worst["max_err_over_scale"], float((d / s.double().clamp_min(1e-300)).max()))
    return worst


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="problem id")
    parser.add_argument("--shape", default="max",
                        help="'default', 'cpu_default', 'min', 'max' or k=v,k=v over the CPU default (default: max)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--seed", type=int, default=0)


def main(args: argparse.Namespace) -> int:
    from orchestrator.catalog import find
    from orchestrator.config import Settings
    from orchestrator.runner.problem import load_problem

    entry = find(Settings.from_args(args), args.problem)
    problem = load_problem(entry.path)
    shape = parse_shape(args.shape, entry.manifest["shapes"])
    result = drift(problem, shape, args.device, args.seed)
    print(json.dumps({"problem": entry.id, "shape": shape, "device": args.device, "drift": result,
                      "tolerance": {k: v for k, v in entry.manifest["tolerance"].items() if k != "calibration"}},
                     indent=2))
    return 0
