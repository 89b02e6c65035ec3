#!/usr/bin/env bash
# Issue 8 on a 2-GPU machine (kind nvidia-h200-x2): the same Popcorn2 oracle pass on both
# GPUs, then on one, through the local executor; prints episodes per hour of each, their
# ratio, and the share of time the GPUs were busy scoring.
#
#   OUT=/tmp/out scripts/gpu/executors_x2.sh [PROBLEM_GLOBS] [PASS_S]
#   PROBLEM_GLOBS  default: the whole popcorn2 track (34 problems); a smaller set that both passes
#                  finish gives the ratio of the same episodes (batch_lanes.sh executors:GLOBS)
#   PASS_S         seconds each pass may start episodes (default 200); then SIGINT: the
#                  episodes in flight finish and are recorded, none start. Throughput is
#                  measured over the episodes recorded, so a cut pass is still a fair figure.
# Fits one 10-minute call: 2 x (PASS_S + 60 s grace) + setup. Writes $OUT/results/x1,
# $OUT/results/x2 (records), $OUT/executors_x2.txt and $OUT/executors_x2.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
PROBLEMS="${1:-}"
PASS_S="${2:-200}"
export POPCORN_RESULTS_DIR="$OUT/results" POPCORN_CACHE_DIR="$OUT/cache"
export POPCORN_SANDBOX="${POPCORN_SANDBOX:-local}" POPCORN_DEVICE="${POPCORN_DEVICE:-cuda}" POPCORN_STRESS="${POPCORN_STRESS:-2}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"

pass() {  # pass NAME GPUS MAX_PARALLEL
    local args=(run --track popcorn2 --harness st --model oracle --gpus "$2" --max-parallel "$3" --run-id "$1"
                --seed 8 --quiet)
    [ -n "$PROBLEMS" ] && args+=(--problems "$PROBLEMS")
    echo "== pass $1: --gpus $2 --max-parallel $3 (episodes start for ${PASS_S}s)"
    timeout -s INT -k 60 "$PASS_S" python3 -m orchestrator "${args[@]}" > "$OUT/$1.log" 2>&1
    echo "exit $? ($(grep -c . "$POPCORN_RESULTS_DIR/$1/episodes.jsonl" 2>/dev/null || echo 0) episode(s) recorded)"
    tail -3 "$OUT/$1.log"
}
# Two GPUs first: anything a first run pays once on a machine (page cache of the CUDA libraries,
# leftovers of an earlier call) falls on the two-GPU pass, so the ratio errs low, never high.
pass x2 0,1 2
pass x1 0 1
python3 scripts/bench_executors.py compare-runs "$POPCORN_RESULTS_DIR/x1" "$POPCORN_RESULTS_DIR/x2" \
    --json "$OUT/executors_x2.json" | tee "$OUT/executors_x2.txt"
