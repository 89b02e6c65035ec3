#!/usr/bin/env bash
# H200: build and verify every single-GPU translation task, offline.
# Needs nvcc 13.0 and torch with CUDA; the pins come from the carried folder
# .carry/translation-pins (made by `python3 -m orchestrator translation pack
# .carry/translation-pins tr-cutlass-cute-hgemm tr-cutlass-tf32-gemm tr-cutlass-grouped-gemm`).
# Results go to $OUT. Extra arguments pass through (--tasks ID..., --stress N, --iters N).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/popcorn-translation-out}"
PINS="${POPCORN_TRANSLATION_PINS:-.carry/translation-pins}"
export POPCORN_CACHE_DIR="${POPCORN_CACHE_DIR:-$PWD/.cache}"  # ignored by git: kept between calls on a warm machine
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())'; } \
  | tee "$OUT/environment.txt"
python3 scripts/gpu/translation_verify.py --pins-dir "$PINS" --out "$OUT" "$@" 2>&1 | tee "$OUT/translation_verify.log"
