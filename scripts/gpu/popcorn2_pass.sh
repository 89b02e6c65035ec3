#!/usr/bin/env bash
# Issue 5's benchmark: a whole Popcorn2 pass with the oracle agent on ONE H200, and the time per
# stage. Resumable across device calls on a warm machine (a call may last 10 minutes; the pass may
# not): each call runs `run --resume` on the same run id under /tmp/popcorn2-pass (PASS_DIR; a warm
# machine keeps /tmp, while a carried `.lanes` replaces the repository's copy every call) until
# PASS_S, and logs its wall time as one segment. The pass's wall time is the sum of the segments;
# an episode cut at a segment's end is lost and run again in the next one, so the sum errs high,
# never low.
#
#   OUT=/tmp/out [PASS_S=520] [MAX_PARALLEL=4] [GPU=0] [STRESS=8] [PASS_DIR=/tmp/popcorn2-pass]
#       [PASS_ORDER_FROM_EARLIER=1] [PASS_LABEL=...] bash scripts/gpu/popcorn2_pass.sh
# Writes $OUT/popcorn2_pass.txt (pass_summary.py), $OUT/pass_rows.jsonl (one row per episode so far,
# for docs/verification-data) and $OUT/pass.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
PASS_S=${PASS_S:-520}
export POPCORN_RESULTS_DIR="${PASS_DIR:-/tmp/popcorn2-pass}" POPCORN_SANDBOX=local POPCORN_DEVICE=${DEVICE:-cuda} POPCORN_STRESS=${STRESS:-8}
mkdir -p "$POPCORN_RESULTS_DIR"
resume=(); [ -d "$POPCORN_RESULTS_DIR/popcorn2-pass" ] && resume=(--resume)  # later calls continue the run
# A fresh pass starts longest-first (executors/order.py) from earlier passes' episode times, kept in
# docs/verification-data/*-pass*.jsonl (pass_summary.py --rows), as records of a run of their own.
if [ ${#resume[@]} = 0 ] && [ "${PASS_ORDER_FROM_EARLIER:-1}" = 1 ]; then
    mkdir -p "$POPCORN_RESULTS_DIR/earlier-passes"
    python3 - "$POPCORN_RESULTS_DIR/earlier-passes/episodes.jsonl" docs/verification-data/*-pass*.jsonl <<'PY'
import json, sys
rows = [json.loads(line) for path in sys.argv[2:] for line in open(path) if line.strip()]
with open(sys.argv[1], "w") as out:
    for row in rows:
        if row.get("status") == "passed" and isinstance(row.get("episode_wall_s"), (int, float)):
            out.write(json.dumps({"kind": "episode", "problem": row["problem"], "harness": "st", "model": "oracle",
                                  "status": "completed", "wall_s": row["episode_wall_s"]}) + "\n")
PY
fi
t0=$(date +%s.%N)
timeout -s INT -k 60 "$PASS_S" python3 -m orchestrator run --track popcorn2 --harness st --model oracle \
    --gpus "${GPU:-0}" --max-parallel "${MAX_PARALLEL:-4}" --run-id popcorn2-pass --seed 8 "${resume[@]}" --quiet ${PROBLEMS:+--problems "$PROBLEMS"} \
    >> "$OUT/pass.log" 2>&1
echo "exit $?" >> "$OUT/pass.log"
echo "$(date +%s.%N) $t0" | awk '{printf "%.1f\n", $1 - $2}' >> "$POPCORN_RESULTS_DIR/segments.txt"
python3 scripts/gpu/pass_summary.py "$POPCORN_RESULTS_DIR/popcorn2-pass" "$POPCORN_RESULTS_DIR/segments.txt" \
    --rows "$OUT/pass_rows.jsonl" --label "${PASS_LABEL:-}" --commit "$(git rev-parse --short HEAD 2>/dev/null)" \
    | tee "$OUT/popcorn2_pass.txt"
tar -C "$POPCORN_RESULTS_DIR" -czf "$OUT/pass_run.tar.gz" .  # the records so far, whichever call is the last
