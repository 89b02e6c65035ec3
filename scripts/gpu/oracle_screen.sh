#!/bin/bash
# Screen one oracle for flaky correctness: a check-mode eval (disclosed shape: fresh, in-place,
# repeat and loaded trials) of problems/PROBLEM/solutions/oracle.py at one stress seed, printed
# as one JSON line. Many at once on the device, e.g. every single-GPU oracle at seed 11 (the
# manifests say which problems are collectives: they need two GPUs):
#   python3 -m orchestrator list --track subdomain --oracle --single-gpu --ids \
#     | awk '{print $0" 11"}' | xargs -P 6 -L 1 bash scripts/gpu/oracle_screen.sh > $OUT/screen.jsonl
# SCREEN_TIMEOUT_S (default 200) bounds each eval; rc 124 means it ran out, not that it failed
# (bfs_level_expand's correctness stage alone takes ~145 s on an H100).
set -u
if [ $# -ne 2 ]; then echo "usage: oracle_screen.sh PROBLEM SEED" >&2; exit 2; fi
problem=$1 seed=$2
start=$SECONDS
verdict=$(timeout "${SCREEN_TIMEOUT_S:-200}" python3 -m orchestrator eval --problem "$problem" \
    --solution "problems/$problem/solutions/oracle.py" --sandbox local --mode check --seed "$seed" --json 2>/dev/null)
rc=$? wall_s=$((SECONDS - start))
python3 - "$problem" "$seed" "$rc" "$wall_s" "$verdict" <<'PY'
import json, sys
problem, seed, rc, wall_s, verdict = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    v = json.loads(verdict)
except ValueError:
    v = {}
print(json.dumps({"problem": problem, "seed": seed, "rc": rc, "wall_s": wall_s, "failure_class": v.get("failure_class"),
                  "detail": (v.get("failure_detail") or "")[:400]}))
PY
