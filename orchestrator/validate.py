"""`validate`: every manifest against its schema, and beyond it.

Beyond the schema: the id equals the folder path and is in the catalog with the same
flags; defaults lie inside their ranges and satisfy the constraints; every formula
names known parameters; reference.py imports and defines the contract; get_inputs
runs at the minimum and CPU-default shapes; the reference runs at the CPU default
(and the default and maximum on a GPU, with --device cuda) and its output is finite
and not so small that an all-zero output would pass; on a GPU, the reference at the
maximum shape (inputs included) needs at most REFERENCE_GPU_SHARE of the GPU's memory.
Each error names the file and the JSON pointer.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from orchestrator.catalog import Entry, load_catalog, read_manifest, select
from orchestrator.config import REPO_ROOT
from orchestrator.errors import UserError

CATALOG_FILE = REPO_ROOT / "problems" / "CATALOG.jsonl"

# The judge runs the reference and the candidate (which may need as much) on one GPU: a reference
# that needs more than this share at the maximum shape leaves an honest candidate out of memory, or
# runs out itself (gcn_layer on an 80 GB H100, eighteenth session).
REFERENCE_GPU_SHARE = 0.45


@lru_cache(maxsize=4)
def _validator(schema_path: str) -> Any:
    import jsonschema

    schema = json.loads(Path(schema_path).read_text())
    return jsonschema.Draft202012Validator(schema)


@lru_cache(maxsize=1)
def catalog_spec() -> dict[str, dict[str, Any]]:
    if not CATALOG_FILE.is_file():
        return {}
    return {d["id"]: d for d in map(json.loads, CATALOG_FILE.read_text().splitlines()) if d}


def schema_errors(manifest: dict[str, Any], schema_path: Path) -> Iterator[tuple[str, str]]:
    for err in sorted(_validator(str(schema_path)).iter_errors(manifest), key=lambda e: list(e.absolute_path)):
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        yield pointer, err.message


def _shape_errors(m: dict[str, Any]) -> Iterator[tuple[str, str]]:
    from orchestrator.runner.shapes import FormulaError, default_shape, evaluate, names_in, satisfies

    params = m.get("shapes", {})
    for name, spec in params.items():
        ptr = f"/shapes/{name}"
        if spec.get("type", "int") == "choice":
            for key in ("default", "cpu_default"):
                if key in spec and spec[key] not in spec["choices"]:
                    yield f"{ptr}/{key}", f"{spec[key]!r} is not one of the choices"
            continue
        lo, hi = spec["min"], spec["max"]
        if lo > hi:
            yield ptr, f"min {lo} > max {hi}"
        for key in ("default", "cpu_default"):
            if key not in spec:
                continue
            v = spec[key]
            if not isinstance(v, (int, float)) or not lo <= v <= hi:
                yield f"{ptr}/{key}", f"{v!r} is outside [{lo}, {hi}]"
            if spec.get("type", "int") == "int" and not isinstance(v, int):
                yield f"{ptr}/{key}", f"{v!r} is not an integer"
            if spec.get("multiple_of") and isinstance(v, int) and v % spec["multiple_of"]:
                yield f"{ptr}/{key}", f"{v} is not a multiple of {spec['multiple_of']}"
    for i, formula in enumerate(m.get("constraints", [])):
        try:
            unknown = names_in(formula) - set(params)
        except SyntaxError:
            yield f"/constraints/{i}", f"cannot parse {formula!r}"
            continue
        if unknown:
            yield f"/constraints/{i}", f"names unknown parameters {sorted(unknown)}"
    for device in ("cuda", "cpu"):
        shape = default_shape(params, device)
        try:
            for c in satisfies(shape, m.get("constraints", [])):
                yield "/constraints", f"the {'default' if device == 'cuda' else 'cpu_default'} shape {shape} violates {c!r}"
        except FormulaError as exc:
            yield "/constraints", str(exc)
    for key in ("flops", "bytes"):
        try:
            value = evaluate(m[key], default_shape(params, "cuda"))
            if not isinstance(value, (int, float)) or value < 0:
                yield f"/{key}", f"evaluates to {value!r} at the default shape, not a count"
        except (FormulaError, ZeroDivisionError, TypeError) as exc:
            yield f"/{key}", str(exc)


def _catalog_errors(entry: Entry, folder_id: str) -> Iterator[tuple[str, str]]:
    m = entry.manifest
    if m.get("id") != folder_id:
        yield "/id", f"{m.get('id')!r} does not match the folder ({folder_id!r})"
    spec = catalog_spec()
    if spec and m.get("id") not in spec:
        yield "/id", f"{m.get('id')!r} is not in problems/CATALOG.jsonl (ids are final)"
    elif spec:
        c = spec[m["id"]]
        for key in ("domain", "level", "popcorn2", "collectives"):
            if key in m and m[key] != c[key]:
                yield f"/{key}", f"{m[key]!r} differs from the catalog ({c[key]!r})"
    if bool(m.get("collectives")) != (m.get("world_size") is not None):
        yield "/world_size", "collectives problems need a world_size range, other problems null"


def _run_errors(entry: Entry, device: str, peaks: dict[str, float]) -> Iterator[tuple[str, str]]:
    import torch

    from orchestrator.runner.compare import zeros_like_output
    from orchestrator.runner.problem import load_problem
    from orchestrator.runner.shapes import boundary_shape, default_shape

    ref_path = entry.path / "reference.py"
    try:
        problem = load_problem(entry.path)
    except Exception as exc:  # the author's code: report, never crash the validator
        yield "reference.py", f"does not import: {type(exc).__name__}: {exc}"
        return
    for name in ("Model", "get_inputs"):
        if not hasattr(problem.module, name):
            yield "reference.py", f"defines no {name}"
            return
    if entry.collectives:
        return  # multi-process references are exercised by their own tests
    params, constraints = entry.manifest["shapes"], entry.manifest.get("constraints", [])
    minimum = boundary_shape(params, constraints, "min", "cpu")
    if minimum is None:
        yield "/constraints", "no shape near the minimum satisfies the constraints"
        return
    shapes = [("minimum", minimum, "cpu"), ("cpu_default", default_shape(params, "cpu"), "cpu")]
    if device == "cuda":
        maximum = boundary_shape(params, constraints, "max", "cuda")
        if maximum is None:
            yield "/constraints", "no shape near the maximum satisfies the constraints"
            return
        shapes += [("default", default_shape(params, "cuda"), "cuda"), ("maximum", maximum, "cuda")]
    for label, shape, dev in shapes:
        if dev == "cuda":
            inputs = out = ref = None  # the last shape's tensors must not count in this one's peak
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            inputs = problem.inputs(shape, 0, dev)
            if label == "minimum":
                continue
            with torch.no_grad():
                out = problem.model(shape, dev)(*inputs)
            ref = tuple(o.cpu() for o in (out if isinstance(out, (tuple, list)) else (out,)))
        except Exception as exc:
            yield str(ref_path), f"fails at the {label} shape {shape}: {type(exc).__name__}: {exc}"
            continue
        if label == "maximum":
            peak = torch.cuda.max_memory_allocated()
            peaks[entry.id] = peak / 2**30
            if excess := _memory_excess(peak):
                yield str(ref_path), f"needs {excess} at the maximum shape {shape}"
        if any(o.is_floating_point() and not bool(torch.isfinite(o).all()) for o in ref):
            yield str(ref_path), f"the reference output has NaN/Inf at the {label} shape"
        ref_obj = ref if isinstance(out, (tuple, list)) else ref[0]
        cpu_inputs = tuple(i.cpu() if isinstance(i, torch.Tensor) else i for i in inputs)
        if problem.compare(cpu_inputs, zeros_like_output(ref_obj), ref_obj).passed:
            yield "/tolerance", f"an all-zero output passes the tolerance at the {label} shape"


def _memory_excess(peak_bytes: int) -> str | None:
    """What the reference needs, said when it is more than REFERENCE_GPU_SHARE of this GPU."""
    import torch

    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if peak_bytes <= REFERENCE_GPU_SHARE * total:
        return None
    return (f"{peak_bytes / 2**30:.1f} GiB of GPU memory, more than {REFERENCE_GPU_SHARE:.0%} of this GPU's "
            f"{total / 2**30:.0f} GiB (the candidate runs beside it): chunk the reference or bound the shapes")


def validate_entry(entry: Entry, settings: Any, run: bool, device: str,
                   peaks: dict[str, float] | None = None) -> list[str]:
    """Every error of one problem or task, one line each; `peaks` gets the reference's GPU memory
    (GiB) at the maximum shape when it ran on a GPU."""
    path = entry.path / "manifest.json"
    if entry.kind == "translation":
        from orchestrator.translation.catalog import validate_manifest

        try:
            validate_manifest(entry.manifest, path)
        except UserError as exc:
            return [str(exc)]
        return []
    folder_id = entry.path.relative_to(settings.problems_dir).as_posix()
    errs = [(p, msg) for p, msg in schema_errors(entry.manifest, settings.schemas_dir / "problem.schema.json")]
    if not errs:
        errs += list(_catalog_errors(entry, folder_id)) + list(_shape_errors(entry.manifest))
    if not errs and run:
        errs += list(_run_errors(entry, device, {} if peaks is None else peaks))
    out = []
    for pointer, msg in errs:
        where = f"{path}: {pointer}" if pointer.startswith("/") else pointer
        out.append(f"{where}: {msg}")
    for required in ("reference.py",):
        if not (entry.path / required).is_file():
            out.append(f"{entry.path / required}: missing")
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", action="append", dest="ids", metavar="ID",
                        help="validate only this problem (repeatable; default: all)")
    parser.add_argument("--track", choices=["subdomain", "popcorn2", "translation-single", "translation-multi"])
    parser.add_argument("--no-run", action="store_true", help="schema and static checks only; do not import references")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda also runs the reference at the default and maximum shapes, prints its peak GPU "
                             "memory at the maximum and fails a reference that needs more than "
                             f"{REFERENCE_GPU_SHARE * 100:.0f}%% of the GPU")


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from orchestrator.config import Settings

    settings = Settings.from_args(args)
    if args.device == "cuda" and not args.no_run:
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda: this machine has no CUDA GPU (or torch has no CUDA build)")
    entries = select(load_catalog(settings), track=args.track)
    if args.ids:
        known = {e.id for e in entries}
        missing = [i for i in args.ids if i not in known]
        if missing:
            raise UserError(f"unknown problem {missing[0]!r} (see `python -m orchestrator list`)")
        entries = [e for e in entries if e.id in args.ids]
    failures: list[str] = []
    peaks: dict[str, float] = {}
    t0 = time.perf_counter()
    for entry in tqdm(entries, desc="validate", unit="problem", disable=not sys.stderr.isatty()):
        errors = validate_entry(entry, settings, run=not args.no_run, device=args.device, peaks=peaks)
        for line in errors:  # as they come: a run cut short keeps what it found
            tqdm.write(line, file=sys.stderr)
        if entry.id in peaks:
            tqdm.write(f"{entry.id}: the reference at the maximum shape peaks at {peaks[entry.id]:.2f} GiB of GPU memory")
        failures += errors
    print(f"{len(entries)} manifests checked in {time.perf_counter() - t0:.1f} s: "
          f"{'all valid' if not failures else f'{len(failures)} errors'}")
    return 1 if failures else 0


__all__ = ["validate_entry", "schema_errors", "read_manifest"]
