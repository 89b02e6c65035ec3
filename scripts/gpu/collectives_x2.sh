#!/usr/bin/env bash
# Collectives problems on a 2-GPU machine (kind nvidia-h200-x2): every collectives problem
# that ships solutions/oracle.py is scored at world size 2 with NCCL (one GPU per rank,
# NCCL_NVLS_ENABLE=0) through `python -m orchestrator eval`, plus the reference ranks'
# own timing. One JSON line per problem goes to $OUT/collectives_x2.jsonl; full verdict
# records to $OUT/verdicts/.
#
#   OUT=/tmp/out scripts/gpu/collectives_x2.sh [STRESS] [PER_PROBLEM_S] [PATTERN]
#   STRESS         hidden stress shapes per problem (default 3)
#   PER_PROBLEM_S  wall limit of one evaluation (default 150)
#   PATTERN        grep -E pattern on problem ids (default: all 11). One device call lasts at most
#                  10 minutes, so split the set, e.g. '^graph|^biology/l2' then '^biology/l3|^robotics'
#                  then '^probability'.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
STRESS="${1:-3}"
PER_PROBLEM_S="${2:-150}"
PATTERN="${3:-.}"
export POPCORN_SANDBOX="${POPCORN_SANDBOX:-local}" POPCORN_COUNTERS=false POPCORN_GPUS=0,1
export POPCORN_TIMING_ITERS="${POPCORN_TIMING_ITERS:-20}"
mkdir -p "$OUT/verdicts"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1 || true
touch "$OUT/collectives_x2.jsonl"
one() {  # one collectives problem: its verdict, then one summary line
    local dir=$1 id=${1#problems/} oracle=$1/solutions/oracle.py
    local out="$OUT/verdicts/${id//\//__}.json"
    echo "== $id"
    # the harness's own limit fires first, so a slow problem still gets a verdict naming its stage
    timeout -k 30 "$PER_PROBLEM_S" python3 -m orchestrator eval --judge-timeout-s $((PER_PROBLEM_S - 25)) --problem "$id" --solution "$oracle" --device "${COLLECTIVES_DEVICE:-cuda}" \
        --world-size 2 --stress "$STRESS" --seed 2 --out "$out" > "$OUT/verdicts/${id//\//__}.log" 2>&1
    local rc=$?
    python3 - "$id" "$out" "$rc" >> "$OUT/collectives_x2.jsonl" <<'PY'
import json, sys
pid, path, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    r = json.load(open(path))
except (OSError, ValueError):
    print(json.dumps({"problem": pid, "status": "no_record", "exit": rc}))
    raise SystemExit
t, stress = r["stages"].get("timing", {}), r["stages"].get("stress", {})
passed = sum(x["passed"] for x in stress.get("trials", []))
# kind "oracle" with the fields of verify_core.py's rows: record_results.py tabulates these too and
# writes the reference time (max over ranks of the per-rank median) measured at the default shape
print(json.dumps({"kind": "oracle", "problem": pid, "status": r["status"], "exit": rc,
                  "failure": r["failure_class"], "failure_detail": r["failure_detail"][:500],
                  "world_size": r["stages"].get("load", {}).get("world_size"),
                  "default_shape": r["stages"].get("correctness", {}).get("shape"),
                  "stress_n": passed if stress else None, "stress": f"{passed}/{stress.get('n')}",
                  "reference_ms": t.get("reference", {}).get("median_ms"),
                  "oracle_ms": t.get("candidate", {}).get("median_ms"),
                  "rank_medians_ms": t.get("candidate_rank_medians_ms"), "speedup": t.get("speedup"),
                  "ci95": t.get("speedup_ci95"), "device": r["device"].get("name")}))
PY
    tail -1 "$OUT/collectives_x2.jsonl"
}
# Several problems at once (PARALLEL): their trials share the two GPUs, their timings take
# both GPUs' locks one evaluation at a time.
running=0
for manifest in $(grep -l '"collectives": true' problems/*/l*/*/manifest.json); do
    dir=$(dirname "$manifest"); id=${dir#problems/}
    echo "$id" | grep -Eq "$PATTERN" || continue
    [ -f "$dir/solutions/oracle.py" ] || { echo "{\"problem\": \"$id\", \"status\": \"no_oracle\"}" >> "$OUT/collectives_x2.jsonl"; continue; }
    one "$dir" &
    running=$((running + 1))
    if [ "$running" -ge "${PARALLEL:-1}" ]; then wait -n; running=$((running - 1)); fi
done
wait
