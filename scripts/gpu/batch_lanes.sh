#!/usr/bin/env bash
# One device call, several verification lanes at once on a 2-GPU machine (nvidia-h200-x2),
# each under its own time limit: the device tool returns at most 8 files, so every lane
# writes under /tmp/lanes/<lane>/ and everything is packed into $OUT/lanes.tar.gz at the
# end; the JSON lines of each lane are also copied to $OUT/<lane>.jsonl.
#
#   bash scripts/gpu/batch_lanes.sh LANE[+LANE]...   (groups run concurrently; A+B runs A, then B)
#   lanes: oracles0[:GLOBS] every single-GPU oracle (comma-separated globs) on GPU 0 (8 hidden
#                           shapes, no ncu); oracles1 the same on GPU 1
#          references[:GLOB] reference times at the default shape of problems without an oracle, GPU 1
#          agent            the mt-all tools through the oracle:tools agent on GPU 1
#          docker           dockerd + images + hardened GPU containers (scripts/gpu/docker_on_device.sh)
#          translation[:IDS] single-GPU translation tasks on GPU 1 (comma-separated ids); translation0 on GPU 0
#          repeat[:ID]      repeatability (10 evaluations) and ncu agreement (REPEAT_NCU=0 skips it) on one oracle,
#                           GPU REPEAT_GPU (default 1; 0 on a one-GPU machine)
#                           (default a single-kernel one: ncu's kernel time is then the whole call)
#          collectives      every collectives oracle at world size 2 (both GPUs)
#          executors[:GLOBS] Popcorn2 oracle pass on two GPUs, then on one (both GPUs); GLOBS (comma-separated)
#                           picks a set small enough that both passes finish it: the ratio is then of the same episodes
#          script:PATH      a Python script on one GPU (SCRIPT_GPU, default 1), e.g. scripts/gpu/csr_spmm_probe.py
#          pass             issue 5's whole Popcorn2 pass on one GPU (PASS_GPU, default 0), resumed by
#                           the next call on a warm machine until complete (scripts/gpu/popcorn2_pass.sh,
#                           segmented; run that script alone for the detached pass that no call cuts)
#          multi[:IDS]      multi-GPU translation tasks at world size 2
#          tbuild[:IDS]     translation builds only (all sides of single and multi tasks, niced), into
#                           ./.cache, which a warm machine keeps for the next call's translation/multi lanes
#          gputests         the GPU-marked agent tool test and the GPU hack fixtures on GPU 1
#          waitfor:LANES    waits until the named lanes (comma-separated) of other groups have ended, e.g.
#                           waitfor:repeat+oracles0 keeps the host quiet while repeat times
# LANE_S (default 540) bounds every lane, counted from the start of the call. Lists of ids (oracles0:@.lanes/list.txt) and measured
# ceilings (.lanes/ceilings.json, reused instead of measuring again) live in the ignored .lanes/:
# pass ".lanes" in the run's carry.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
FINAL_OUT=$OUT; L=/tmp/lanes; mkdir -p $L
LANE_S=${LANE_S:-540}; END=$(( $(date +%s) + LANE_S ))  # every lane ends by then, also the second of A+B
REPEAT=biology/l1/smith_waterman_score
AGENT_PROBLEMS=${AGENT_PROBLEMS:-graph/l1/csr_spmv,robotics/l1/forward_kinematics_dh}
mkdir -p $L/ceilings
# A warm machine keeps what an earlier call left running (a lane's timeout kills its script, and a
# sandbox's processes live in their own session): record and stop them before anything is timed.
leftovers() {
    { date +%T; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
      pgrep -af 'popcorn-sbx|orchestrator|translation_verify|verify_core' | grep -v "^$$ " ; } >> $L/leftovers.txt 2>&1
    pkill -9 -f 'popcorn-sbx|python3 -m orchestrator|verify_core.py|translation_verify.py' 2>/dev/null || true
}
rm -f $L/*/ended  # a warm machine keeps /tmp/lanes: only this call's lanes count for waitfor
leftovers
if [ -f .lanes/ceilings.json ]; then cp .lanes/ceilings.json $L/ceilings/  # measured by an earlier call on this kind
else OUT=$L/ceilings python3 scripts/gpu/verify_core.py ceilings >/dev/null 2>&1; fi

lane() {  # lane NAME ARG
    local name=$1 arg=${2:-} dir=$L/$1; mkdir -p $dir; cp -f $L/ceilings/ceilings.json $dir/ 2>/dev/null
    local budget=$(( END - $(date +%s) )); [ $budget -lt 10 ] && { echo "== lane $name: no time left"; return; }
    echo "== $(date +%T) lane $name start (${budget}s)"
    case $name in
        oracles|oracles0|oracles1) gpu=${name#oracles}; OUT=$dir POPCORN_GPUS=${gpu:-0} POPCORN_COUNTERS=false STRESS=8 \
                 PARALLEL=${PARALLEL:-6} timeout $budget python3 scripts/gpu/verify_core.py oracles "$arg" ;;
        references) OUT=$dir CUDA_VISIBLE_DEVICES=1 GPU_LOCK=/tmp/popcorn-gpu1.lock REFERENCE_S=120 REFERENCE_MAX=0 \
                    WITHOUT_ORACLE=1 PARALLEL=3 timeout $budget python3 scripts/gpu/verify_core.py references "$arg" ;;
        agent) OUT=$dir POPCORN_GPUS=${AGENT_GPU:-1} POPCORN_STRESS=2 timeout $budget bash scripts/gpu/agent_mt_all.sh \
               "${AGENT_LOCAL_PROBLEMS:-$AGENT_PROBLEMS}" local ;;
        docker) OUT=$dir ORACLE_BUDGET_S=120 AGENT_PROBLEMS=$AGENT_PROBLEMS POPCORN_STRESS=2 \
                timeout $budget bash scripts/gpu/docker_on_device.sh ;;
        translation|translation0|translation1) gpu=${name#translation}
                     OUT=$dir timeout $budget bash scripts/gpu/translation_verify.sh --gpus ${gpu:-1} --stress 4 \
                     ${arg:+--tasks ${arg//,/ }} ;;
        repeat) OUT=$dir POPCORN_GPUS=${REPEAT_GPU:-1} timeout ${REPEAT_S:-300} python3 scripts/gpu/verify_core.py repeat ${arg:-$REPEAT} 10
                [ "${REPEAT_NCU:-1}" = 1 ] && OUT=$dir NCU_GPU=${REPEAT_GPU:-1} timeout 150 python3 scripts/gpu/verify_core.py ncu ${arg:-$REPEAT} ;;
        collectives) OUT=$dir PARALLEL=${COLLECTIVES_PARALLEL:-3} timeout $budget bash scripts/gpu/collectives_x2.sh 2 \
                     ${COLLECTIVES_S:-240} "${arg:-.}" ;;
        script) OUT=$dir CUDA_VISIBLE_DEVICES=${SCRIPT_GPU:-1} timeout $budget python3 $arg ;;
        pass) OUT=$dir PASS_DETACH=0 PASS_S=$(( budget - 75 )) GPU=${PASS_GPU:-0} bash scripts/gpu/popcorn2_pass.sh ;;
        executors) OUT=$dir timeout $budget bash scripts/gpu/executors_x2.sh "$arg" ${PASS_S:-90} ;;
        tbuild) for track in translation-single translation-multi; do
                    POPCORN_CACHE_DIR=$PWD/.cache nice -n 10 timeout $budget python3 scripts/gpu/translation_verify.py \
                        --build-only --track $track --jobs 12 --pins-dir .carry/translation-pins --out $dir \
                        ${arg:+--tasks ${arg//,/ }} &
                done; wait ;;
        multi) OUT=$dir timeout $budget bash scripts/gpu/translation_verify_multi.sh --stress 3 ${arg:+--tasks ${arg//,/ }} ;;
        gputests) POPCORN_GPUS=${GPUTESTS_GPU:-1} timeout $budget python3 -m pytest -q -p no:cacheprovider -rA tests/agent/test_gpu_tools.py \
                  tests/test_hacks.py -k "gpu_tools or side_stream or cuda_event or honest or monkeypatch_timer_dynamic" ;;
        waitfor) for other in ${arg//,/ }; do
                     until [ -f $L/$other/ended ] || [ $(date +%s) -ge $END ]; do sleep 2; done
                 done ;;
        *) echo "unknown lane $name" ;;
    esac > $dir/lane.log 2>&1
    echo "== $(date +%T) lane $name exit $?"
    touch $dir/ended
    for f in $dir/*.jsonl; do [ -f "$f" ] && cat "$f" >> $FINAL_OUT/$name.jsonl; done
}
run_specs() {  # A+B: lanes A then B, one after the other (e.g. a quiet repeat before translation on GPU 1)
    local spec; IFS=+ read -ra specs <<< "$1"
    for spec in "${specs[@]}"; do lane "${spec%%:*}" "$( [[ $spec == *:* ]] && echo "${spec#*:}")"; done
}
for group in "$@"; do run_specs "$group" & done
wait
rm -f $L/*/ended  # a warm machine keeps /tmp/lanes: only this call's lanes count for waitfor
leftovers
tar -C $L -czf $FINAL_OUT/lanes.tar.gz --exclude='*.so' --exclude='cache' --exclude='root-*' . 2>/dev/null
ls -la $FINAL_OUT; du -sh $FINAL_OUT/lanes.tar.gz
