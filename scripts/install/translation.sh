#!/usr/bin/env bash
# Translation track: nvcc 13.0 for the compile tests (tests/translation/test_builds.py).
# Idempotent and quiet; fails loudly. Where nvcc 13.0 is missing it is assembled from
# the PyPI wheels of the CUDA 13.0 toolkit (compiler, crt, nvvm, runtime, cccl) into
# $POPCORN_CUDA_PREFIX (default /usr/local/cuda-13.0) with a wrapper on PATH.
# POPCORN_CUDA_FORCE=1 installs even when an nvcc 13.0 is already found (to test this script).
set -euo pipefail

release="13.0"
prefix="${POPCORN_CUDA_PREFIX:-/usr/local/cuda-13.0}"
bindir="${POPCORN_CUDA_BINDIR:-/usr/local/bin}"
wheels=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-culibos==13.0.85)

has_release() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "release ${release},"; }

if [ "${POPCORN_CUDA_FORCE:-0}" != 1 ]; then
  if command -v nvcc >/dev/null 2>&1 && has_release "$(command -v nvcc)"; then exit 0; fi
  if has_release "$prefix/bin/nvcc"; then
    printf '#!/bin/sh\nexec %s/bin/nvcc "$@"\n' "$prefix" > "$bindir/nvcc"; chmod +x "$bindir/nvcc"; exit 0
  fi
fi

command -v g++ >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq g++ >/dev/null; }
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$stage" "${wheels[@]}"
src="$stage/nvidia/cu13"
[ -d "$src/bin" ] || { echo "translation.sh: unexpected wheel layout (no nvidia/cu13/bin in $stage)" >&2; exit 1; }
mkdir -p "$prefix"
cp -a "$src/." "$prefix/"
[ -d "$prefix/lib" ] && [ ! -e "$prefix/lib64" ] && ln -s lib "$prefix/lib64"
chmod +x "$prefix"/bin/* "$prefix"/nvvm/bin/* 2>/dev/null || true
printf '#!/bin/sh\nexec %s/bin/nvcc "$@"\n' "$prefix" > "$bindir/nvcc"
chmod +x "$bindir/nvcc"
has_release "$prefix/bin/nvcc" || { echo "translation.sh: $prefix/bin/nvcc is not release $release" >&2; exit 1; }
# A real compile: catches missing headers (crt, cccl) or a missing cicc/ptxas.
probe="$stage/probe.cu"
printf '#include <cuda_runtime.h>\n#include <cuda/std/atomic>\n__global__ void k(float* x){x[threadIdx.x]*=2.f;}\nint main(){k<<<1,32>>>(nullptr);return 0;}\n' > "$probe"
"$prefix/bin/nvcc" -gencode arch=compute_90a,code=sm_90a -o "$stage/probe" "$probe" \
  || { echo "translation.sh: nvcc from PyPI wheels cannot compile a probe kernel" >&2; exit 1; }
