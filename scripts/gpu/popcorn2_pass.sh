#!/usr/bin/env bash
# Issue 5's benchmark: a whole Popcorn2 pass with the oracle agent on ONE H200, and the time per
# stage. A device call lasts at most 10 minutes; the pass takes longer. Two ways to span calls:
#  - detached (PASS_DETACH=1, the default): the first call starts the whole pass in a process
#    session of its own, from a copy of the repository under $PASS_DIR, which a warm machine keeps
#    running after the call returns (the device README); that call and every later one wait for it
#    up to WAIT_S and summarize the pass so far. Nothing is cut, so the pass's wall time is one
#    segment. Calls must follow each other within the machine's 30 s warm time, and must not run
#    batch_lanes.sh meanwhile (it stops leftover orchestrator processes).
#  - segmented (PASS_DETACH=0): each call runs `run --resume` on the same run id until PASS_S and
#    logs its wall time as one segment; an episode cut at a segment's end is lost and run again in
#    the next one, so the sum of the segments errs high, never low.
#
#   OUT=/tmp/out [PASS_DETACH=1] [WAIT_S=540] [PASS_S=520 segmented, 1700 detached] [MAX_PARALLEL=4]
#       [GPU=0] [STRESS=8] [PASS_DIR=/tmp/popcorn2-pass] [PASS_ORDER_FROM_EARLIER=1] [PASS_LABEL=...]
#       [PROBLEMS=glob,...] bash scripts/gpu/popcorn2_pass.sh
# Writes $OUT/popcorn2_pass.txt (pass_summary.py), $OUT/pass_rows.jsonl (one row per episode so far,
# for docs/verification-data), $OUT/pass.log and $OUT/pass_run.tar.gz (the run's records); detached,
# also $OUT/host_samples.txt (GPU utilization and load average every 2 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
PASS_DIR=${PASS_DIR:-/tmp/popcorn2-pass}; mkdir -p "$PASS_DIR"
# The commit as the records name it (orchestrator/provenance.py): the device's .git can be older
# than the tree it runs, and a tree that differs from its commit says so.
COMMIT=${COMMIT:-$(python3 -c 'from orchestrator.provenance import git_state; s = git_state()
print((s["git"] or "")[:7] + ("+modified" if s["git_dirty"] else ""))' 2>/dev/null)}

summarize() {  # summarize SEGMENTS_FILE: the pass so far, into $OUT
    python3 scripts/gpu/pass_summary.py "$PASS_DIR/popcorn2-pass" "$1" --rows "$OUT/pass_rows.jsonl" \
        --label "${PASS_LABEL:-}" --commit "$COMMIT" --gpu-samples "$PASS_DIR/gpu_samples.csv" | tee "$OUT/popcorn2_pass.txt"
    tar -C "$PASS_DIR" --exclude=./repo -czf "$OUT/pass_run.tar.gz" .  # whichever call is the last
}

if [ "${PASS_DETACH:-1}" = 1 ]; then
    if [ ! -f "$PASS_DIR/detached.started" ]; then
        # A copy of the repository: the next call's working tree replaces this one's carried paths.
        rm -rf "$PASS_DIR/repo"; mkdir -p "$PASS_DIR/repo"
        tar --exclude=./.cache --exclude=./.venv --exclude=./.carry --exclude=./.git -cf - . | tar -C "$PASS_DIR/repo" -xf -
        date +%s.%N > "$PASS_DIR/detached.started"
        export PASS_DIR COMMIT
        setsid nohup bash -c '
            nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 2 \
                > "$PASS_DIR/gpu_samples.csv" 2>&1 & gpu_sampler=$!
            while sleep 2; do echo "$(date +%s) $(cut -d" " -f1-4 /proc/loadavg)"; done > "$PASS_DIR/load_samples.txt" &
            load_sampler=$!
            OUT="$PASS_DIR/detached-out" PASS_DETACH=0 PASS_SUMMARIZE=0 PASS_S=${PASS_S:-1700} \
                bash "$PASS_DIR/repo/scripts/gpu/popcorn2_pass.sh"
            kill $gpu_sampler $load_sampler 2>/dev/null
            date +%s.%N > "$PASS_DIR/detached.done"' > "$PASS_DIR/detached.log" 2>&1 < /dev/null &
        echo $! > "$PASS_DIR/detached.pid"
        echo "started the detached pass in $PASS_DIR"
    fi
    end=$(( $(date +%s) + ${WAIT_S:-540} ))
    until [ -f "$PASS_DIR/detached.done" ] || [ "$(date +%s)" -ge $end ]; do
        if ! kill -0 "$(cat "$PASS_DIR/detached.pid")" 2>/dev/null && [ ! -f "$PASS_DIR/detached.done" ]; then
            # a fresh machine, or something stopped it: say so, rather than wait for it every call
            echo "popcorn2_pass.sh: the detached pass in $PASS_DIR is gone without finishing" \
                 "(remove $PASS_DIR/detached.started to start it again: it resumes the run)" >&2
            exit 1
        fi
        sleep 1
    done
    cat "$PASS_DIR/load_samples.txt" "$PASS_DIR/gpu_samples.csv" > "$OUT/host_samples.txt" 2>/dev/null
    cp -f "$PASS_DIR/detached-out/pass.log" "$OUT/" 2>/dev/null
    if [ -f "$PASS_DIR/detached.done" ]; then
        summarize "$PASS_DIR/segments.txt"
    else  # still running: the wall time so far stands for the one segment
        echo "$(date +%s.%N) $(cat "$PASS_DIR/detached.started")" | awk '{printf "%.1f\n", $1 - $2}' > "$PASS_DIR/so-far.txt"
        echo "(the pass is still running)"; summarize "$PASS_DIR/so-far.txt"
    fi
    exit 0
fi

export POPCORN_RESULTS_DIR="$PASS_DIR" POPCORN_SANDBOX=local POPCORN_DEVICE=${DEVICE:-cuda} POPCORN_STRESS=${STRESS:-8}
PASS_S=${PASS_S:-520}
resume=(); [ -d "$POPCORN_RESULTS_DIR/popcorn2-pass" ] && resume=(--resume)  # later calls continue the run
# A fresh pass starts longest-first (executors/order.py) from earlier passes' episode times, kept in
# docs/verification-data/*-pass*.jsonl (pass_summary.py --rows), as records of a run of their own.
if [ ${#resume[@]} = 0 ] && [ "${PASS_ORDER_FROM_EARLIER:-1}" = 1 ]; then
    mkdir -p "$POPCORN_RESULTS_DIR/earlier-passes"
    shopt -s nullglob; earlier=(docs/verification-data/*-pass*.jsonl); shopt -u nullglob
    python3 - "$POPCORN_RESULTS_DIR/earlier-passes/episodes.jsonl" "${earlier[@]}" <<'PY'
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
# the detached pass's own run leaves the summary to the call that waits for it (PASS_SUMMARIZE=0)
[ "${PASS_SUMMARIZE:-1}" = 1 ] && summarize "$POPCORN_RESULTS_DIR/segments.txt"
exit 0
