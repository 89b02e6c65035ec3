#!/usr/bin/env bash
# GPU verification of the mt-all tools (issue 4): a scripted agent (`--model oracle:tools`)
# calls every tool (compile, check, specs, static_analysis, profile, disassemble,
# roofline) on the oracle of two problems, then submits; scoring runs as usual.
#
#   OUT=/tmp/out scripts/gpu/agent_mt_all.sh [PROBLEM_GLOBS] [SANDBOXES]
#   PROBLEM_GLOBS  comma-separated (default graph/l1/csr_spmv,robotics/l1/forward_kinematics_dh)
#   SANDBOXES      space-separated backends to try (default "local docker"; docker is
#                  skipped when no engine answers or the problem images are not built)
#
# One backend fits a 10-minute call (worst case about 9.5 min: ncu checks <= 3 min, the
# run <= 6.5 min, stress 4 shapes): run `... local` and `... docker` as two calls.
#
# Writes to $OUT: environment.txt (driver, ncu, counter permission), ncu_host.txt (a
# bare ncu run outside any sandbox), ncu_sandbox_<backend>.txt (ncu inside a sandbox,
# with and without extra privileges where the backend allows), results/<run>/ (records,
# transcripts, artifacts), tool_outputs_<backend>.txt (every tool output, readable),
# cache/ceilings/*.json (the measured ceilings) and summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/popcorn-agent-out}"
PROBLEMS="${1:-graph/l1/csr_spmv,robotics/l1/forward_kinematics_dh}"
SANDBOXES="${2:-local docker}"
mkdir -p "$OUT"
export POPCORN_RESULTS_DIR="$OUT/results" POPCORN_CACHE_DIR="$OUT/cache"
export NCCL_NVLS_ENABLE=0 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export POPCORN_STRESS="${POPCORN_STRESS:-4}"
NCU="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"

{
  echo "date: $(date -u +%FT%TZ)  user: $(id)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  echo "ncu: $("$NCU" --version 2>&1 | tail -1) at $NCU -> $(readlink -f "$NCU")"
  echo "cuobjdump: $(cuobjdump --version 2>&1 | tail -1)"
  echo "RmProfilingAdminOnly (1 = counters restricted to admins): $(grep -h RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null || echo unknown)"
  echo "capabilities of this shell: $(grep CapEff /proc/self/status)"
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), "triton", triton.__version__)'
  docker version --format 'docker engine {{.Server.Version}}' 2>/dev/null || echo "docker: no engine"
} 2>&1 | tee "$OUT/environment.txt"

# 1. ncu outside any sandbox: are counters readable at all on this host?
cat > "$OUT/ncu_target.py" <<'EOF'
import torch
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
torch.cuda.profiler.start()
y = x * 2
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("ok", float(y.sum()))
EOF
timeout 60 "$NCU" --profile-from-start off --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  python3 "$OUT/ncu_target.py" >"$OUT/ncu_host.txt" 2>&1
echo "ncu on the host: exit $? $(grep -c ERR_NVGPUCTRPERM "$OUT/ncu_host.txt") ERR_NVGPUCTRPERM line(s)" | tee -a "$OUT/summary.txt"

# 2. ncu inside each sandbox backend, as the tools run it (least privilege first).
for backend in $SANDBOXES; do
  timeout 120 python3 - "$backend" "$NCU" "$OUT" <<'EOF' 2>&1 | tee "$OUT/ncu_sandbox_$backend.txt" | tail -5
import sys
from pathlib import Path
backend, ncu, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
from orchestrator.sandbox.base import SandboxSpec, create
kw = {}
if backend == "docker":
    try:
        from orchestrator.images import resolve_image
        import os
        lock = os.environ.get("POPCORN_IMAGES_LOCK")
        kw["image"] = resolve_image("graph/l1/csr_spmv", Path(lock) if lock else None)[0]
    except Exception as exc:  # no engine or no image: say so and stop
        print(f"{backend}: skipped ({type(exc).__name__}: {exc})")
        raise SystemExit(0)
spec = SandboxSpec(run_id="gpu-verify", episode="ncu", gpus=(0,), **kw)


def try_ncu(sb, label):
    sb.put_files({"t.py": (out / "ncu_target.py").read_bytes()})
    found = sb.exec(["sh", "-c", "ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1"], timeout_s=20).stdout.strip()
    for tool in [t for t in (ncu, "ncu", "/usr/local/cuda/bin/ncu", found) if t]:
        r = sb.exec([tool, "--profile-from-start", "off", "--metrics", "gpu__time_duration.sum", sb.python, "t.py"],
                    timeout_s=50, cwd=sb.workdir)
        print(f"try {tool}: exit {r.returncode} {r.stderr.strip()[-200:]}")
        if r.returncode != 127 and "No such file" not in r.stderr:
            break
    print(f"--- {label}: isolation {sb.isolation}")
    print(r.stdout[-3000:], r.stderr[-3000:])
    verdict = "RESTRICTED (ERR_NVGPUCTRPERM)" if "ERR_NVGPUCTRPERM" in r.stdout + r.stderr else \
        ("counters readable" if "gpu__time_duration.sum" in r.stdout else f"failed (exit {r.returncode})")
    print(f"ncu inside the {backend} sandbox ({label}): {verdict}")
    return verdict


try:
    with create(backend, spec) as sb:
        verdict = try_ncu(sb, "no extra capability")
except Exception as exc:
    print(f"{backend}: cannot create a sandbox ({type(exc).__name__}: {exc})")
    raise SystemExit(0)
if backend == "docker" and verdict.startswith("RESTRICTED"):
    # The same hardened container plus CAP_SYS_ADMIN only: is that the least privilege that works?
    from orchestrator.sandbox.docker import DockerSandbox

    class WithSysAdmin(DockerSandbox):
        def create_kwargs(self):
            kwargs = super().create_kwargs()
            kwargs["cap_add"] = ["SYS_ADMIN"]
            return kwargs

    with WithSysAdmin(spec) as sb:
        try_ncu(sb, "hardened + CAP_SYS_ADMIN")
EOF
  grep -h "^ncu inside\|skipped\|cannot create" "$OUT/ncu_sandbox_$backend.txt" >>"$OUT/summary.txt"
done

# 3. The episodes: oracle:tools calls every mt-all tool, then submits.
for backend in $SANDBOXES; do
  run_id="gpu-mt-all-$backend"
  rm -rf "$OUT/results/$run_id"
  timeout 390 python3 -m orchestrator run --track popcorn2 --harness mt-all --model oracle:tools \
      --problems "$PROBLEMS" --sandbox "$backend" --device cuda --run-id "$run_id" --max-turns 4 --tool-timeout-s 150 --quiet \
      >"$OUT/run_$backend.log" 2>&1
  echo "run $run_id: exit $?" | tee -a "$OUT/summary.txt"
  tail -8 "$OUT/run_$backend.log" >>"$OUT/summary.txt"
  python3 - "$OUT/results/$run_id" <<'EOF' >"$OUT/tool_outputs_$backend.txt" 2>&1
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
for path in sorted((run / "transcripts").glob("*.json")):
    t = json.loads(path.read_text())
    print(f"=================== {t['problem']} ({t['status']}) ===================")
    for call in t["tool_calls"]:
        out = t["messages"][call["message_index"]]["content"]
        print(f"--- {call['name']} ok={call['ok']} wall={call['wall_s']} s ---\n{out}\n")
EOF
  for tool in profile disassemble roofline; do
    echo "$backend $tool ok: $(python3 -c "
import json,sys,glob
oks=[c['ok'] for p in glob.glob('$OUT/results/$run_id/transcripts/*.json') for c in json.load(open(p))['tool_calls'] if c['name']=='$tool']
print(oks)")" >>"$OUT/summary.txt"
  done
done
cat "$OUT/summary.txt"
