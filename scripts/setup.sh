#!/usr/bin/env bash
# Set up PopcornBench in ./.venv on a fresh machine; idempotent.
#   scripts/setup.sh          the package (torch, triton, the orchestrator's dependencies)
#   scripts/setup.sh --test   plus the test dependencies and every scripts/install/*.sh
#                             (dockerd, chromium, nvcc, ... for the CPU test suite)
# A machine without an NVIDIA driver gets the CPU build of torch (pinned: an unpinned
# torch pulls a multi-GB CUDA build); a GPU machine keeps the torch it has, or gets one.
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

if [ ! -x .venv/bin/python ]; then
    # --system-site-packages: reuse a torch/triton the machine already has (GPU hosts).
    python3 -m venv --system-site-packages .venv
fi
export PATH="$PWD/.venv/bin:$PATH"
pip() { python -m pip --disable-pip-version-check -q "$@"; }

if ! python -c 'import torch' >/dev/null 2>&1; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        pip install torch
    else
        pip install torch==2.13.0
    fi
fi
extras="kernels"
[ "$want_test" = 1 ] && extras="kernels,test,report"
pip install -e ".[$extras]"

if [ "$want_test" = 1 ]; then
    for script in scripts/install/*.sh; do
        [ -e "$script" ] || continue
        bash "$script"
    done
fi
python -c 'import torch, orchestrator; print(f"setup: torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")'
