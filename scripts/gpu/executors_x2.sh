#!/usr/bin/env bash
# Issue 8 on a 2-GPU machine (kind nvidia-h200-x2): the same Popcorn2 oracle pass on both
# GPUs, then on one, through the local executor; prints episodes per hour of each, their
# ratio, and the share of time the GPUs were busy scoring.
#
#   OUT=/tmp/out [HISTORY=JSON] [SLOTS=1] scripts/gpu/executors_x2.sh [PROBLEM_GLOBS] [PASS_S]
#   SLOTS          episodes per GPU at once (--max-parallel is SLOTS x GPUs in both passes); above
#                  1, judges share a GPU outside their timings
#   PROBLEM_GLOBS  default: the whole popcorn2 track (34 problems); a smaller set that both passes
#                  finish gives the ratio of the same episodes (batch_lanes.sh executors:GLOBS)
#   PASS_S         seconds each pass may start episodes (default 200); then SIGINT: the
#                  episodes in flight finish and are recorded, none start. Throughput is
#                  measured over the episodes recorded, so a cut pass is still a fair figure.
#   HISTORY        compare-runs --json output of an earlier pass with its "episodes" (e.g.
#                  docs/verification-data/2026-11-30-s6-call3-executors.json): its episode times
#                  become records under the results root, so the passes start longest-first
#                  (run --order), its problems are the set, and a third pass (x2c: both GPUs,
#                  --order catalog, warm, so it errs in catalog's favour) gives the comparison.
#                  Expected from the s6 history: x2 ~111-114 s, busy ~97-99 %, ratio ~1.9;
#                  x2c ~127 s, busy ~88 %, ratio ~1.7. Those figures predate 2026-12-01, when a
#                  judge still held its GPU alone throughout; judges now share a GPU except while
#                  they time, so the one-GPU pass gains more from --max-parallel than it did.
# Fits one 10-minute call: 2 (3 with HISTORY) x (PASS_S + 60 s grace) + setup. Writes
# $OUT/results/{x1,x2[,x2c,history]} (records), $OUT/executors_x2.txt and .json
# (and executors_catalog_x2.json).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
PROBLEMS="${1:-}"
SLOTS=${SLOTS:-1}
PASS_S="${2:-200}"
export POPCORN_RESULTS_DIR="$OUT/results" POPCORN_CACHE_DIR="$OUT/cache"
export POPCORN_SANDBOX="${POPCORN_SANDBOX:-local}" POPCORN_DEVICE="${POPCORN_DEVICE:-cuda}" POPCORN_STRESS="${POPCORN_STRESS:-2}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"

if [ -n "${HISTORY:-}" ]; then
    # The earlier pass's episodes as records of a run directory under the results root: what
    # `run` reads for its expected durations (st, oracle: the harness and model of the passes).
    PROBLEMS=$(python3 - "$HISTORY" "$POPCORN_RESULTS_DIR/history" <<'PY'
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
PY
)
    [ -n "$PROBLEMS" ] || { echo "no episodes in $HISTORY"; exit 1; }
fi

pass() {  # pass NAME GPUS MAX_PARALLEL [EXTRA RUN FLAGS...]
    local name=$1 gpus=$2 parallel=$3; shift 3
    local args=(run --track popcorn2 --harness st --model oracle --gpus "$gpus" --max-parallel "$parallel"
                --run-id "$name" --seed 8 --quiet "$@")
    [ -n "$PROBLEMS" ] && args+=(--problems "$PROBLEMS")
    echo "== pass $name: --gpus $gpus --max-parallel $parallel $* (episodes start for ${PASS_S}s)"
    timeout -s INT -k 60 "$PASS_S" python3 -m orchestrator "${args[@]}" > "$OUT/$name.log" 2>&1
    echo "exit $? ($(grep -c . "$POPCORN_RESULTS_DIR/$name/episodes.jsonl" 2>/dev/null || echo 0) episode(s) recorded)"
    grep '^order:' "$OUT/$name.log"
    tail -3 "$OUT/$name.log"
}
compare() {  # compare TWO_GPU_RUN JSON
    python3 scripts/bench_executors.py compare-runs "$POPCORN_RESULTS_DIR/x1" "$POPCORN_RESULTS_DIR/$1" --json "$2"
}
{
    # Two GPUs first: anything a first run pays once on a machine (page cache of the CUDA libraries,
    # leftovers of an earlier call) falls on the two-GPU pass, so the ratio errs low, never high.
    pass x2 0,1 $((2 * SLOTS))
    pass x1 0 "$SLOTS"
    compare x2 "$OUT/executors_x2.json"
    if [ -n "${HISTORY:-}" ]; then
        pass x2c 0,1 $((2 * SLOTS)) --order catalog
        echo "== catalog order on two GPUs against one"
        compare x2c "$OUT/executors_catalog_x2.json"
    fi
} 2>&1 | tee "$OUT/executors_x2.txt"
