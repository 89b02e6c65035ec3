#!/usr/bin/env bash
# Issue 8, longest-first start order (orchestrator/executors/order.py) on a 2-GPU machine
# (kind nvidia-h200-x2): the Popcorn2 oracle pass of executors_x2.sh, with the episodes'
# durations from an earlier session's records, so the two-GPU pass starts them longest-first.
#
#   OUT=/tmp/out scripts/gpu/executors_order_x2.sh [HISTORY_JSON] [PASS_S]
#   HISTORY_JSON  compare-runs --json output of an earlier pass, with its "episodes" (default
#                 docs/verification-data/2026-11-30-s6-call3-executors.json: six episodes,
#                 one GPU 218 s, two GPUs 127 s in catalog order, busy 88.3 %, ratio 1.71x)
#   PASS_S        seconds each pass may start episodes (default 200), as in executors_x2.sh
#   CATALOG=0     skip the third pass (two GPUs again, --order catalog) if the call is short
#
# Passes, in this order: x2 (GPUs 0,1, longest-first; it runs first, so first-run costs can
# only lower its figures), x1 (GPU 0), x2c (GPUs 0,1, catalog order, warm: the comparison
# errs in catalog's favour). About 110 + 220 + 130 s: one 10-minute call.
# Writes $OUT/results/{history,x2,x1,x2c}, $OUT/executors_order_x2.txt and .json.
# Expected (list schedule of the history's walls): x2 ends ~111-114 s, GPUs busy ~97-99 % (goal
# >= 90 %), ratio x1/x2 ~1.9-1.95; x2c as before, ~127 s, busy ~88 %, ratio ~1.7.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
HISTORY="${1:-docs/verification-data/2026-11-30-s6-call3-executors.json}"
PASS_S="${2:-200}"
export POPCORN_RESULTS_DIR="$OUT/results" POPCORN_CACHE_DIR="$OUT/cache"
export POPCORN_SANDBOX="${POPCORN_SANDBOX:-local}" POPCORN_DEVICE="${POPCORN_DEVICE:-cuda}" POPCORN_STRESS="${POPCORN_STRESS:-2}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"

# The earlier pass's episodes as records of a run directory under the results root: what
# `run` reads for its expected durations (st, oracle: the harness and model of the passes).
PROBLEMS=$(python3 - "$HISTORY" "$POPCORN_RESULTS_DIR/history" <<'EOF'
import json, sys
from pathlib import Path
from orchestrator.agent.records import RunDir
episodes = json.loads(Path(sys.argv[1]).read_text())["episodes"]
history = RunDir(Path(sys.argv[2]))
for i, e in enumerate(episodes):
    if e.get("status") in ("passed", "failed") and isinstance(e.get("wall_s"), (int, float)):
        history.append_record({"kind": "episode", "run_id": "history", "episode_id": f"history.{i}",
                               "problem": e["problem"], "attempt": 0, "harness": "st", "model": "oracle",
                               "status": "completed", "wall_s": e["wall_s"], "from": f"{sys.argv[1]}:{e['run']}"})
print(",".join(dict.fromkeys(e["problem"] for e in episodes)))
EOF
)
[ -n "$PROBLEMS" ] || { echo "no episodes in $HISTORY"; exit 1; }
echo "problems: $PROBLEMS"

pass() {  # pass NAME GPUS MAX_PARALLEL [EXTRA...]
    local name=$1 gpus=$2 parallel=$3; shift 3
    echo "== pass $name: --gpus $gpus --max-parallel $parallel $* (episodes start for ${PASS_S}s)"
    timeout -s INT -k 60 "$PASS_S" python3 -m orchestrator run --track popcorn2 --harness st --model oracle \
        --gpus "$gpus" --max-parallel "$parallel" --run-id "$name" --seed 8 --quiet --problems "$PROBLEMS" "$@" \
        > "$OUT/$name.log" 2>&1
    echo "exit $? ($(grep -c . "$POPCORN_RESULTS_DIR/$name/episodes.jsonl" 2>/dev/null || echo 0) episode(s) recorded)"
    grep '^order:' "$OUT/$name.log"
    tail -2 "$OUT/$name.log"
}
{
    pass x2 0,1 2
    pass x1 0 1
    [ "${CATALOG:-1}" != 0 ] && pass x2c 0,1 2 --order catalog
    echo "== longest-first on two GPUs against one"
    python3 scripts/bench_executors.py compare-runs "$POPCORN_RESULTS_DIR/x1" "$POPCORN_RESULTS_DIR/x2" \
        --json "$OUT/executors_order_x2.json"
    if [ -f "$POPCORN_RESULTS_DIR/x2c/episodes.jsonl" ]; then
        echo "== catalog order on two GPUs against one"
        python3 scripts/bench_executors.py compare-runs "$POPCORN_RESULTS_DIR/x1" "$POPCORN_RESULTS_DIR/x2c" \
            --json "$OUT/executors_catalog_x2.json"
    fi
} 2>&1 | tee "$OUT/executors_order_x2.txt"
