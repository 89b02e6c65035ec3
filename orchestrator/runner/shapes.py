"""Shape parameters: safe formula evaluation and hidden-shape sampling.

A manifest declares each shape parameter (`int`, `float` or `choice`) with a default
and a range, plus `constraints`: formulas over the parameters that every shape must
satisfy (``"n_rows * avg_degree <= 2**28"``, ``"hidden % n_heads == 0"``). FLOP and
byte counts are formulas of the same kind. Formulas are parsed with `ast` and only
arithmetic, comparisons, boolean operators and a few functions are allowed, so a
manifest cannot run code.

Stress shapes are drawn from a secret seed: the first is the lower boundary, the
second the upper boundary (capped on a CPU), the rest log-uniform, with integers
nudged to odd or non-power-of-two values where their constraints allow.
"""
from __future__ import annotations

import ast
import math
import operator
import random
from typing import Any, Mapping

Shape = dict[str, Any]

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
_FUNCS = {
    "min": min, "max": max, "abs": abs, "log2": math.log2, "log": math.log,
    "sqrt": math.sqrt, "ceil": math.ceil, "floor": math.floor, "int": int,
}


class FormulaError(ValueError):
    """A formula is malformed or names an unknown parameter."""


def evaluate(formula: str, values: Mapping[str, Any]) -> Any:
    """Evaluate a manifest formula over shape parameters (no code execution)."""
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"cannot parse {formula!r}: {exc.msg}") from exc
    return _eval(tree.body, values, formula)


def names_in(formula: str) -> set[str]:
    """Parameter names a formula refers to (function names excluded)."""
    tree = ast.parse(formula, mode="eval")
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def _eval(node: ast.AST, values: Mapping[str, Any], src: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise FormulaError(f"{src!r} names unknown parameter {node.id!r}")
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, values, src), _eval(node.right, values, src))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        v = _eval(node.operand, values, src)
        return -v if isinstance(node.op, ast.USub) else (+v if isinstance(node.op, ast.UAdd) else not v)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values, src)
        for op, comp in zip(node.ops, node.comparators):
            if type(op) not in _CMPOPS:
                raise FormulaError(f"{src!r}: operator {type(op).__name__} is not allowed")
            right = _eval(comp, values, src)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, values, src) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, values, src) else node.orelse, values, src)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*[_eval(a, values, src) for a in node.args])
    raise FormulaError(f"{src!r}: {type(node).__name__} is not allowed in a formula")


def default_shape(params: Mapping[str, Mapping[str, Any]], device: str = "cuda") -> Shape:
    """The disclosed shape. On a CPU a parameter's `cpu_default` replaces `default`."""
    key = "cpu_default" if device == "cpu" else "default"
    return {name: spec.get(key, spec["default"]) for name, spec in params.items()}


def satisfies(shape: Shape, constraints: list[str]) -> list[str]:
    """The constraints a shape violates (empty when it is valid)."""
    return [c for c in constraints if not evaluate(c, shape)]


def _upper(spec: Mapping[str, Any], device: str) -> Any:
    # A CPU cannot run the H200-sized maximum in reasonable time: stress stays at or
    # below the CPU default there (the run is labelled CPU and is a functional check).
    if device == "cpu" and (spec.get("type", "int") == "int" or "cpu_default" in spec):
        return spec.get("cpu_default", spec["default"])
    return spec["max"]


def _snap(value: int, spec: Mapping[str, Any]) -> int:
    step = int(spec.get("multiple_of", 1))
    lo, hi = int(spec["min"]), int(spec["max"])
    value = max(lo, min(hi, value))
    value = (value // step) * step
    if value < lo:
        value += step
    return value


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _draw(spec: Mapping[str, Any], rng: random.Random, device: str) -> Any:
    kind = spec.get("type", "int")
    if kind == "choice":
        return rng.choice(list(spec["choices"]))
    lo, hi = spec["min"], _upper(spec, device)
    if kind == "float":
        if spec.get("log") and lo > 0:
            return math.exp(rng.uniform(math.log(lo), math.log(hi)))
        return rng.uniform(lo, hi)
    lo, hi = int(lo), int(hi)
    if spec.get("log", hi >= 4 * max(lo, 1)) and lo > 0:
        v = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 0.999)))))
    else:
        v = rng.randint(lo, hi)
    v = _snap(v, spec)
    step = int(spec.get("multiple_of", 1))
    # Prefer odd and non-power-of-two sizes: kernels that only work on nice sizes fail.
    if step == 1 and v % 2 == 0 and v + 1 <= hi:
        v += 1
    elif _is_pow2(v) and v + step <= hi:
        v += step
    return min(v, _snap(hi, spec)) if kind == "int" else v


def _boundary(params: Mapping[str, Mapping[str, Any]], which: str, device: str) -> Shape:
    shape: Shape = {}
    for name, spec in params.items():
        kind = spec.get("type", "int")
        if kind == "choice":
            choices = list(spec["choices"])
            shape[name] = choices[0] if which == "min" else choices[-1]
        elif which == "min":
            shape[name] = _snap(int(spec["min"]), spec) if kind == "int" else spec["min"]
        else:
            hi = _upper(spec, device)
            shape[name] = _snap(int(hi), spec) if kind == "int" else hi
    return shape


def _repair(shape: Shape, params: Mapping[str, Mapping[str, Any]], constraints: list[str],
            rng: random.Random, device: str, tries: int = 200) -> Shape | None:
    """Shrink size parameters towards their minimum until the constraints hold."""
    if not satisfies(shape, constraints):
        return shape
    shape = dict(shape)
    for _ in range(tries):
        name = rng.choice([n for n, s in params.items() if s.get("type", "int") != "choice"] or list(params))
        spec = params[name]
        kind = spec.get("type", "int")
        if kind == "choice":
            shape[name] = rng.choice(list(spec["choices"]))
        elif kind == "float":
            shape[name] = spec["min"] + (shape[name] - spec["min"]) * rng.uniform(0.3, 0.9)
        else:
            shape[name] = _snap(int(spec["min"] + (shape[name] - spec["min"]) * rng.uniform(0.3, 0.9)), spec)
        if not satisfies(shape, constraints):
            return shape
    return None


def boundary_shape(params: Mapping[str, Mapping[str, Any]], constraints: list[str], which: str,
                   device: str = "cuda", seed: int = 0) -> Shape | None:
    """The lower ("min") or upper ("max") boundary, shrunk until every constraint holds
    (the maxima of all parameters at once rarely satisfy them)."""
    return _repair(_boundary(params, which, device), params, constraints, random.Random(seed), device)


def stress_shapes(params: Mapping[str, Mapping[str, Any]], constraints: list[str], n: int,
                  seed: int, device: str = "cuda") -> list[Shape]:
    """Draw `n` hidden shapes: boundaries first, then random ones, all valid."""
    rng = random.Random(seed)
    out: list[Shape] = []
    disclosed = default_shape(params, device)
    candidates = [_boundary(params, "min", device), _boundary(params, "max", device)]
    attempts = 0
    while len(out) < n and attempts < 50 * max(n, 1):
        attempts += 1
        raw = candidates.pop(0) if candidates else {k: _draw(s, rng, device) for k, s in params.items()}
        shape = _repair(raw, params, constraints, rng, device)
        if shape is None or shape in out:
            continue
        if shape == disclosed and len(params) > 0 and attempts < 40 * max(n, 1):
            continue  # the disclosed shape proves nothing about generality
        out.append(shape)
    return out


def shape_key(shape: Shape) -> str:
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))
