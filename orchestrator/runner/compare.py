"""Output checks: structure, NaN/Inf, and the manifest's metric.

Every metric also applies a relative-norm guard (`rel_norm_max`, default 1e-2):
an absolute tolerance alone lets an all-zero output pass wherever the reference is
small, so ||out - ref|| / ||ref|| must stay under the guard too. Messages are written
for the model (shape, dtype, count of bad elements, the first few bad indices).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import torch

METRICS = ("allclose", "rel_norm", "exact", "fraction_match", "accept_mismatch")
DEFAULT_REL_NORM_MAX = 1e-2


@dataclass
class Comparison:
    passed: bool
    message: str = ""
    max_abs_err: float | None = None
    rel_norm_err: float | None = None
    mismatch_fraction: float | None = None
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("details")
        return d


def as_tuple(out: Any) -> tuple[Any, ...]:
    if isinstance(out, (tuple, list)):
        return tuple(out)
    return (out,)


def _first_bad(mask: torch.Tensor, k: int = 5) -> str:
    idx = mask.nonzero()[:k].tolist()
    return ", ".join(str(tuple(i)) for i in idx)


def _rel_norm(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.double() - ref.double()).norm().item()
    denom = ref.double().norm().item()
    if denom == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / denom


def mismatches_allowed(tol: Mapping[str, Any], total: int, fraction: float | None = None) -> int:
    """Elements (or units) that may differ: a (1 - fraction) share or `min_mismatches`, whichever
    is larger. The floor is for small outputs, where 1 % is less than one rounding event's
    footprint (a threshold flip changes two residues' scores, however short the chain)."""
    fraction = float(tol.get("fraction", 0.99)) if fraction is None else float(fraction)
    return max(int(tol.get("min_mismatches", 0)), math.floor((1 - fraction) * total + 1e-9))


def _floor_note(tol: Mapping[str, Any]) -> str:
    return f", or at most {tol['min_mismatches']} differing" if tol.get("min_mismatches") else ""


def compare_tensor(out: Any, ref: torch.Tensor, tol: Mapping[str, Any], name: str = "output",
                   scale: torch.Tensor | None = None) -> Comparison:
    """Compare one candidate tensor against the reference under `tol`.

    `scale` (from the reference's optional `tolerance_scale`) is the magnitude of the
    terms each element sums, e.g. sum |a_ik b_kj|: rtol then bounds the error relative
    to max(|ref|, scale), the classic bound for floating-point sums with cancellation.
    """
    if not isinstance(out, torch.Tensor):
        return Comparison(False, f"{name}: expected a tensor, got {type(out).__name__}")
    if out.shape != ref.shape:
        return Comparison(False, f"{name}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, f"{name}: dtype {out.dtype} != expected {ref.dtype}")
    # Compare where the reference lives (the judge keeps it on the GPU: fast, and the
    # float64 temporaries of a multi-GB output fit there rather than in host memory).
    ref = ref.detach()
    out = out.detach().to(ref.device)
    metric = tol.get("metric", "allclose")
    if out.numel() == 0:
        return Comparison(True, f"{name}: empty", 0.0, 0.0, 0.0)
    if not (out.is_floating_point() or out.is_complex()) or metric == "exact":
        equal = out == ref
        if out.is_floating_point():
            equal |= torch.isnan(out) & torch.isnan(ref)
        bad = ~equal
        n_bad = int(bad.sum())
        frac = n_bad / out.numel()
        if n_bad == 0:
            return Comparison(True, f"{name}: exact match", 0.0, 0.0, 0.0)
        if metric == "fraction_match" and not out.is_floating_point():
            # integer outputs (ancestor indices, trajectories): a stated fraction must match
            need = float(tol.get("fraction", 0.99))
            ok = n_bad <= mismatches_allowed(tol, out.numel())
            return Comparison(ok, f"{name}: {1.0 - frac:.5f} of elements match exactly (need {need}{_floor_note(tol)})",
                              mismatch_fraction=frac)
        return Comparison(False, f"{name}: {n_bad} of {out.numel()} elements differ (exact match required); "
                                 f"first at {_first_bad(bad)}", mismatch_fraction=frac)
    nonfinite = ~torch.isfinite(out) & torch.isfinite(ref)
    if nonfinite.any():
        return Comparison(False, f"{name}: {int(nonfinite.sum())} NaN/Inf values where the reference is finite; "
                                 f"first at {_first_bad(nonfinite)}")
    finite = torch.isfinite(ref)
    o, r = out.double()[finite], ref.double()[finite]
    mag = r.abs() if scale is None else torch.maximum(r.abs(), scale.detach().to(ref.device).double()[finite])
    abs_err = (o - r).abs()
    max_abs = float(abs_err.max()) if abs_err.numel() else 0.0
    rel = _rel_norm(o, r)
    guard = float(tol.get("rel_norm_max", DEFAULT_REL_NORM_MAX))
    atol, rtol = float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0))
    mism = (out != ref) & finite
    exact_frac = float(mism.sum()) / out.numel()
    stats = dict(max_abs_err=max_abs, rel_norm_err=rel, mismatch_fraction=exact_frac)
    if metric == "rel_norm":
        limit = float(tol.get("rel_norm", guard))
        ok = rel <= limit
        return Comparison(ok, f"{name}: relative norm error {rel:.3g} {'<=' if ok else '>'} {limit:.3g}", **stats)
    if metric == "fraction_match":
        need = float(tol.get("fraction", 0.99))
        exact_ok = 1.0 - exact_frac
        close = abs_err <= atol + rtol * mag
        ok = int(mism.sum()) <= mismatches_allowed(tol, out.numel()) and bool(close.all()) and rel <= guard
        return Comparison(ok, f"{name}: {exact_ok:.4f} of elements match exactly (need {need}{_floor_note(tol)}); "
                              f"{int((~close).sum())} outside atol={atol:g} rtol={rtol:g}; rel-norm {rel:.3g}", **stats)
    # allclose (also the element check inside accept_mismatch chains)
    close = abs_err <= atol + rtol * mag
    n_bad = int((~close).sum())
    if n_bad:
        bad_full = torch.zeros_like(finite)
        bad_full[finite] = ~close
        return Comparison(False, f"{name}: {n_bad} of {out.numel()} elements outside atol={atol:g} rtol={rtol:g} "
                                 f"(max abs err {max_abs:.3g}); first at {_first_bad(bad_full)}", **stats)
    if rel > guard:
        return Comparison(False, f"{name}: relative norm error {rel:.3g} > {guard:g} although every element is "
                                 f"within atol/rtol (an output near zero does not pass)", **stats)
    return Comparison(True, f"{name}: max abs err {max_abs:.3g}, rel-norm {rel:.3g}", **stats)


def _accept_mismatch(outs: Sequence[Any], refs: Sequence[torch.Tensor], tol: Mapping[str, Any]) -> Comparison:
    """Metropolis chains: compare up to each chain's first accept-decision mismatch.

    `tol.decisions_output` names the bool output [chains, steps] of accept decisions;
    the other outputs have the chain axis first and a step axis second. A `fraction`
    (default 0.99) of chains must match every decision; each output must agree within
    atol/rtol on every chain up to that chain's first mismatch.
    """
    di = int(tol.get("decisions_output", len(refs) - 1))
    dec_out, dec_ref = outs[di], refs[di]
    base = compare_tensor(dec_out, dec_ref, {"metric": "exact"}, f"output[{di}]")
    if dec_out is None or not isinstance(dec_out, torch.Tensor) or dec_out.shape != dec_ref.shape:
        return base
    differ = (dec_out.to(dec_ref.device) != dec_ref)
    steps = differ.shape[1]
    first = torch.where(differ.any(1), differ.float().argmax(1),
                        torch.full((differ.shape[0],), steps, device=differ.device))
    full = float((first == steps).float().mean())
    need = float(tol.get("fraction", 0.99))
    if full < need:
        return Comparison(False, f"only {full:.4f} of chains match every accept decision (need {need})",
                          mismatch_fraction=1 - full)
    worst = 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        if i == di:
            continue
        if not isinstance(o, torch.Tensor) or o.shape != r.shape or o.dtype != r.dtype:
            return compare_tensor(o, r, tol, f"output[{i}]")
        keep = torch.arange(r.shape[1], device=r.device).unsqueeze(0) < first.unsqueeze(1)
        keep = keep.reshape(keep.shape + (1,) * (r.dim() - 2)).expand_as(r)
        c = compare_tensor(o.to(r.device)[keep], r[keep], {**tol, "metric": "allclose"}, f"output[{i}]")
        if not c.passed:
            return c
        worst = max(worst, c.max_abs_err or 0.0)
    return Comparison(True, f"{full:.4f} of chains match every decision; max abs err {worst:.3g} before mismatches",
                      max_abs_err=worst, mismatch_fraction=1 - full)


def units_agree(parts: Sequence[tuple[str, torch.Tensor, torch.Tensor, int]], tol: Mapping[str, Any],
                unit: str, fraction: float) -> tuple[bool, str]:
    """For a problem's `check_output` whose answer is a batch of independent runs (filters,
    optimizations) in which rounding can grow: each run is compared as a unit. `parts` are
    (name, output, reference, the run's axis); a run matches when all its values in every part
    lie within atol + rtol |ref|. Up to `min_mismatches` runs (tolerance, default 0) or a
    (1 - fraction) share of them may differ, and the matching runs pass the relative-norm
    guard. Returns (passed, message), as `check_output` does."""
    atol, rtol = float(tol["atol"]), float(tol["rtol"])
    guard = float(tol.get("rel_norm_max", DEFAULT_REL_NORM_MAX))
    runs = [(name, out.to(ref.device).double().movedim(axis, 0), ref.double().movedim(axis, 0))
            for name, out, ref, axis in parts]
    for name, out, ref in runs:
        if out.shape != ref.shape:
            return False, f"{name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)} ({unit} first)"
    match = units_within(runs, atol, rtol)
    total, agree = match.numel(), int(match.sum())
    allowed = mismatches_allowed(tol, total, fraction)
    if total - agree > allowed:
        worst = max(float((out - ref).abs().max()) for _, out, ref in runs)
        return False, (f"only {agree} of {total} {unit} agree within atol={atol:g} rtol={rtol:g} "
                       f"(at most {allowed} may differ); max abs err {worst:.3g}")
    failure = norm_guard_failure(runs, match, guard, unit)
    if failure:
        return False, failure
    return True, f"{agree} of {total} {unit} agree within atol/rtol"


def units_within(runs: Sequence[tuple[str, torch.Tensor, torch.Tensor]], atol: float, rtol: float,
                 match: torch.Tensor | None = None) -> torch.Tensor:
    """Per unit (the first axis of every (name, output, reference)): are all its values in every
    part within atol + rtol |ref|? `match` (a bool per unit) is narrowed in place when given."""
    if match is None:
        match = torch.ones(runs[0][2].shape[0], dtype=torch.bool, device=runs[0][2].device)
    for _, out, ref in runs:
        match &= ((out - ref).abs() <= atol + rtol * ref.abs()).reshape(out.shape[0], -1).all(1)
    return match


def norm_guard_failure(runs: Sequence[tuple[str, torch.Tensor, torch.Tensor]], match: torch.Tensor,
                       guard: float, unit: str) -> str | None:
    """The relative-norm guard on the matching units of every part: a failure message, or None."""
    for name, out, ref in runs:
        diff, norm = float((out[match] - ref[match]).norm()), float(ref[match].norm())
        if diff > guard * norm:
            return f"{name}: relative norm error {diff / max(norm, 1e-300):.3g} > {guard:g} on matching {unit}"
    return None


def compare_structure(out: Any, ref: Any, same_length: bool = True) -> Comparison:
    """Count, type, shape, dtype and NaN/Inf of every output: what a problem's own
    `check_output` may take for granted. `same_length=False` lets the first dimension
    differ (variable-size answers such as contact sets, which the checker judges)."""
    outs, refs = as_tuple(out), as_tuple(ref)
    if len(outs) != len(refs):
        return Comparison(False, f"expected {len(refs)} outputs, got {len(outs)}")
    for i, (o, r) in enumerate(zip(outs, refs)):
        name = f"output[{i}]" if len(refs) > 1 else "output"
        if not isinstance(o, torch.Tensor):
            return Comparison(False, f"{name}: expected a tensor, got {type(o).__name__}")
        shape_ok = o.shape == r.shape or (not same_length and o.dim() == r.dim() and o.shape[1:] == r.shape[1:])
        if not shape_ok or o.dtype != r.dtype:
            return Comparison(False, f"{name}: {tuple(o.shape)} {o.dtype} != expected {tuple(r.shape)} {r.dtype}")
        if o.is_floating_point():
            finite_ref = torch.isfinite(r.detach().to(o.device)) if o.shape == r.shape else bool(torch.isfinite(r).all())
            bad = ~torch.isfinite(o.detach()) & finite_ref
            if bad.any():
                return Comparison(False, f"{name}: {int(bad.sum())} NaN/Inf values where the reference is finite")
    return Comparison(True, "structure matches")


def compare_outputs(out: Any, ref: Any, tol: Mapping[str, Any], scale: Any = None) -> Comparison:
    """Compare a candidate's forward() result with the reference's (tensor or tuple)."""
    outs, refs = as_tuple(out), as_tuple(ref)
    scales = as_tuple(scale) if scale is not None else (None,) * len(refs)
    if len(outs) != len(refs):
        return Comparison(False, f"expected {len(refs)} outputs, got {len(outs)}")
    if tol.get("metric") == "accept_mismatch":
        return _accept_mismatch(outs, refs, tol)
    per_output = tol.get("per_output") or []
    results = []
    for i, (o, r) in enumerate(zip(outs, refs)):
        t = {**tol, **(per_output[i] if i < len(per_output) else {})}
        c = compare_tensor(o, r, t, f"output[{i}]" if len(refs) > 1 else "output", scales[i])
        if not c.passed:
            return c
        results.append(c)
    worst = max(results, key=lambda c: c.rel_norm_err or 0.0)
    return Comparison(True, "; ".join(c.message for c in results),
                      max(c.max_abs_err or 0.0 for c in results), worst.rel_norm_err,
                      max(c.mismatch_fraction or 0.0 for c in results))


def zeros_like_output(ref: Any) -> Any:
    outs = tuple(torch.zeros_like(r) for r in as_tuple(ref))
    return outs if isinstance(ref, (tuple, list)) else outs[0]
