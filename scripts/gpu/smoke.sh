#!/usr/bin/env bash
# First GPU call: environment, ceilings, a few oracles with 2 hidden shapes, GPU-only hack fixtures.
set -u
source scripts/gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee $OUT/nvidia-smi.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)" | tee $OUT/versions.txt
python3 -c "import pydantic_settings, jsonschema, openai, docker; print('deps ok')"
python3 scripts/gpu/verify_core.py ceilings
STRESS=2 timeout 300 python3 scripts/gpu/verify_core.py oracles "${1:-graph/l1/csr_spmv,probability/l1/gibbs_ising_checkerboard,robotics/l1/forward_kinematics_dh}"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_hacks.py -k "side_stream or cuda_event or honest or monkeypatch_timer_dynamic" 2>&1 | tail -15 | tee $OUT/hacks_gpu.txt
