#!/usr/bin/env bash
# One device call: every oracle (8 hidden shapes, in parallel; timings take the GPU alone),
# the repeatability and ncu-agreement benchmarks, and the mt-all tools on one problem.
#   bash scripts/gpu/verify_batch.sh [ORACLE_GLOB]
set -u
source scripts/gpu/env.sh
python3 scripts/gpu/verify_core.py ceilings
STRESS=8 PARALLEL=${PARALLEL:-4} timeout 480 python3 scripts/gpu/verify_core.py oracles "${1:-}" > $OUT/oracles.log 2>&1 &
oracles=$!
timeout 300 python3 scripts/gpu/verify_core.py repeat graph/l1/csr_spmv 10 > $OUT/repeat.log 2>&1
timeout 120 python3 scripts/gpu/verify_core.py ncu graph/l1/csr_spmv > $OUT/ncu.log 2>&1
POPCORN_STRESS=2 timeout 330 bash scripts/gpu/agent_mt_all.sh graph/l1/csr_spmv local > $OUT/agent.log 2>&1
wait $oracles
tail -3 $OUT/repeat.log $OUT/ncu.log $OUT/agent.log
python3 - <<'PY'
import json, os
for line in open(os.environ["OUT"] + "/oracles.jsonl"):
    r = json.loads(line)
    print(f"{r['problem']:45s} {r['status']:7s} {str(r['failure']):14s} speedup={r['speedup'] and round(r['speedup'],3)} "
          f"ci={r['ci95'] and [round(x,3) for x in r['ci95']]} ref_ms={r['reference_ms'] and round(r['reference_ms'],3)} "
          f"dram={r.get('dram_fraction') and round(r['dram_fraction'],3)} wall={r['wall_s']}")
PY
