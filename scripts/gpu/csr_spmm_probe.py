"""GPU probe for the graph/l1/csr_spmm oracle (one device call, about a minute):
the autotuner's timing of every config, the oracle against torch.sparse.mm (cuSPARSE) at the
default shape and a few others, the time of the _prepare launch alone, and correctness.
Lines of JSON on stdout and in $OUT/csr_spmm_probe.jsonl.

    source scripts/gpu/env.sh && python3 scripts/gpu/csr_spmm_probe.py
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import torch
import triton

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "problems" / "graph" / "l1" / "csr_spmm"
OUT = Path(os.environ.get("OUT", "/tmp/out"))


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emit(record: dict) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    with open(OUT / "csr_spmm_probe.jsonl", "a") as f:
        f.write(line + "\n")


def probe(shape: dict, reference, oracle) -> None:
    inputs = reference.get_inputs(shape, torch.Generator().manual_seed(1), "cuda")
    model, candidate = reference.Model(), oracle.ModelNew()
    expected = model(*inputs)
    got = candidate(*inputs)  # autotunes (untimed)
    scale = reference.tolerance_scale(inputs, expected).float()
    excess = ((got - expected).abs() - (1e-5 + 1e-5 * torch.maximum(expected.abs(), scale))).max().item()
    oracle_ms = triton.testing.do_bench(lambda: candidate(*inputs), warmup=50, rep=400)
    reference_ms = triton.testing.do_bench(lambda: model(*inputs), warmup=50, rep=400)
    tuned = {str(k): str(v.best_config) for k, v in oracle._tuned_kernels.items()}
    timings = {str(c): round(t[0] if isinstance(t, (list, tuple)) else t, 4)
               for v in oracle._tuned_kernels.values() for c, t in (getattr(v, "configs_timings", None) or {}).items()}
    nnz, feat = inputs[1].numel(), shape["feat"]
    gathered_gb = nnz * feat * 4 / 1e9
    emit({"shape": shape, "nnz": nnz, "correct": excess <= 0, "worst_excess_over_tolerance": excess,
          "oracle_ms": round(oracle_ms, 4), "reference_ms": round(reference_ms, 4),
          "speedup": round(reference_ms / oracle_ms, 3),
          "oracle_gather_tb_s": round(gathered_gb / oracle_ms, 3), "best": tuned, "config_ms": timings})


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    reference = load("csr_spmm_reference", FOLDER / "reference.py")
    oracle = load("csr_spmm_oracle", FOLDER / "solutions" / "oracle.py")
    for shape in ({"n_rows": 1_000_000, "avg_degree": 16, "feat": 128, "alpha": 2.1},
                  {"n_rows": 1_000_000, "avg_degree": 16, "feat": 64, "alpha": 2.1},
                  {"n_rows": 500_000, "avg_degree": 32, "feat": 256, "alpha": 1.8},
                  {"n_rows": 1_000_000, "avg_degree": 4, "feat": 40, "alpha": 3.0}):
        try:
            probe(shape, reference, oracle)
        except Exception as error:  # one shape failing must not hide the others
            emit({"shape": shape, "error": repr(error)[:2000]})


if __name__ == "__main__":
    main()
