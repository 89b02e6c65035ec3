#!/usr/bin/env bash
# 2-GPU machine (nvidia-h200-x2): build and verify every multi-GPU translation task whose
# glue is complete, at world_size 2 (one rank per GPU), offline. NVLink multicast stays
# off (NCCL_NVLS_ENABLE=0; these kernels use CUDA IPC only). Pins come from the carried
# folder .carry/translation-pins (made by `python3 -m orchestrator translation pack
# .carry/translation-pins tr-vllm-custom-allreduce`). Results go to $OUT.
# Extra arguments pass through (--tasks ID..., --gpus 0,1, --stress N, --iters N).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/popcorn-translation-out}"
PINS="${POPCORN_TRANSLATION_PINS:-.carry/translation-pins}"
export POPCORN_CACHE_DIR="${POPCORN_CACHE_DIR:-$PWD/.cache}"  # ignored by git: kept between calls on a warm machine
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true; nvidia-smi topo -m || true
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.device_count())'; } \
  | tee "$OUT/environment_multi.txt"
python3 scripts/gpu/translation_verify.py --track translation-multi --gpus 0,1 --pins-dir "$PINS" --out "$OUT" "$@" \
  2>&1 | tee "$OUT/translation_verify_multi.log"
