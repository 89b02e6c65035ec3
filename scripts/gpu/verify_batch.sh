#!/usr/bin/env bash
# One device call: every single-GPU oracle (8 hidden shapes, several at once; timings take
# the GPU alone), and the repeatability and ncu-agreement benchmarks on csr_spmv.
# Everything lands in $OUT/results.jsonl line by line (a timeout loses nothing).
#   bash scripts/gpu/verify_batch.sh [ORACLE_GLOB]
set -u
source scripts/gpu/env.sh
python3 scripts/gpu/verify_core.py ceilings
STRESS=8 PARALLEL=${PARALLEL:-5} timeout ${ORACLE_S:-400} python3 scripts/gpu/verify_core.py oracles "${1:-}" > $OUT/oracles.log 2>&1 &
oracles=$!
timeout 300 python3 scripts/gpu/verify_core.py repeat graph/l1/csr_spmv 10 > $OUT/repeat.log 2>&1
timeout 90 python3 scripts/gpu/verify_core.py ncu graph/l1/csr_spmv > $OUT/ncu.log 2>&1
wait $oracles
cut -c1-400 $OUT/results.jsonl
