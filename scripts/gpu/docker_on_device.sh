#!/usr/bin/env bash
# Run the docker sandbox for real on the GPU machine, which has no Docker engine:
# start a carried dockerd (Debian bookworm binaries from .carry/docker, made by
# scripts/gpu/docker_carry.sh), import a skeleton image, build the base/domain/problem
# layers on it, and run containers with --device /dev/nvidia* and the machine's /usr,
# /opt and /usr/local/nvidia bind-mounted read-only (the fallback for hosts without
# nvidia-container-toolkit). Then: the hardening tests with a GPU attached, the GPU tests
# (one multi-GPU container with NCCL when there are 2+ GPUs), and the oracle solutions
# scored in per-problem containers. Logs and JSON go to $OUT.
#
#   run(command="bash scripts/gpu/docker_on_device.sh", carry=[".carry/docker"])
#   (on nvidia-h200-x2 too, for the multi-GPU container)
#   GPU_TESTS_ONLY=1 [GPU_TESTS_S=240]: the engine, then tests/docker/test_gpu.py alone (a short call)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/popcorn-out}; mkdir -p "$OUT"
D=/tmp/popcorn-docker; mkdir -p "$D/bin"
exec > >(tee "$OUT/docker_on_device.log") 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
host_ld=${LD_LIBRARY_PATH:-}
step() { echo "== $(date +%T) $*"; }

step "unpack engine"
tar -xJf .carry/docker/bins.tar.xz -C "$D/bin" || exit 1
tar -xJf .carry/docker/libs.tar.xz -C "$D" || exit 1
chmod +x "$D"/bin/*
export PATH="$D/bin:$PATH"
# the carried libraries come last: the host's own copies win where it has them
engine_ld="${host_ld:+$host_ld:}$D/lib"
if ! python3 -c 'import docker, pydantic_settings' 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/docker/wheels/*.whl || exit 1
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

step "machine"
uname -a; nvidia-smi -L; python3 -c 'import torch, sys; print(sys.executable, torch.__version__, torch.cuda.device_count())'
mount | grep -E 'cgroup|/usr/local/nvidia' | head; ls -la /dev/nvidia* | head

start_dockerd() {  # $1: storage driver
    rm -f "$D/docker.sock"
    LD_LIBRARY_PATH=$engine_ld setsid dockerd --iptables=false --ip-masq=false --bridge=none \
        --storage-driver "$1" --data-root "$D/root-$1" --exec-root "$D/exec" --pidfile "$D/dockerd.pid" \
        -H "unix://$D/docker.sock" >"$OUT/dockerd-$1.log" 2>&1 &
    export DOCKER_HOST="unix://$D/docker.sock"
    for _ in $(seq 60); do
        python3 -c 'from orchestrator.sandbox.docker import engine_available as e; raise SystemExit(not e())' && return 0
        kill -0 $! 2>/dev/null || return 1
        sleep 1
    done
    return 1
}
step "start dockerd"
if ! start_dockerd overlay2; then
    tail -5 "$OUT/dockerd-overlay2.log"; kill "$(cat "$D/dockerd.pid" 2>/dev/null)" 2>/dev/null; sleep 2
    start_dockerd vfs || { tail -20 "$OUT/dockerd-vfs.log"; exit 1; }
fi
python3 -c 'import docker; i = docker.from_env().info(); print({k: i.get(k) for k in ("ServerVersion", "Driver", "CgroupVersion", "CgroupDriver", "SecurityOptions", "Runtimes")})'

step "images on a skeleton toolchain"
TC=$(python3 -m orchestrator images host-toolchain --kind skeleton) || exit 1
# sandboxes only (images build reads none of it): GPUs by --device, the host's driver bound in
export POPCORN_DOCKER_GPU_MODE=devices
export POPCORN_DOCKER_BINDS=${POPCORN_DOCKER_BINDS:-/usr,/opt,/usr/local/nvidia}
export POPCORN_DOCKER_PYTHON=${POPCORN_DOCKER_PYTHON:-$(command -v python3)}
export POPCORN_DOCKER_LD_LIBRARY_PATH=${POPCORN_DOCKER_LD_LIBRARY_PATH:-$host_ld}
echo "binds $POPCORN_DOCKER_BINDS python $POPCORN_DOCKER_PYTHON ld $POPCORN_DOCKER_LD_LIBRARY_PATH"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
docker_tests() {  # $1: time limit (s), then test files; every GPU attached, log in $OUT
    local limit=$1; shift
    POPCORN_TEST_DOCKER_TOOLCHAIN="$TC" POPCORN_TEST_DOCKER_GPUS="$(seq -s, 0 $((ngpu - 1)))" \
        timeout "$limit" python3 -m pytest -p no:cacheprovider -q -rA "$@" > "$OUT/docker_tests.log" 2>&1
}
leftovers() { step "leftovers"; python3 -m orchestrator sandbox prune; kill "$(cat "$D/dockerd.pid")" 2>/dev/null; }
if [ -n "${GPU_TESTS_ONLY:-}" ]; then  # a short call: tests/docker/test_gpu.py alone (its fixture builds one image chain)
    step "GPU tests in containers ($ngpu GPUs)"
    docker_tests "${GPU_TESTS_S:-240}" tests/docker/test_gpu.py; rc=$?
    echo "tests exit $rc"; tail -15 "$OUT/docker_tests.log"
    leftovers; exit $rc
fi
python3 -m orchestrator images build --quiet --write-dockerfiles --toolchain "$TC" --lock "$OUT/images.lock.json" \
    || echo "some images failed to build (see above)"
python3 -m orchestrator images list --toolchain "$TC" | head -40

step "exec overhead per tool call, container start (scripts/bench_docker.py)"
export POPCORN_IMAGES_LOCK="$OUT/images.lock.json"  # runs below use exactly the images just built
IMG=$(python3 -c 'import os, pathlib; from orchestrator.images import resolve_image
print(resolve_image("graph/l1/csr_spmv", pathlib.Path(os.environ["POPCORN_IMAGES_LOCK"]))[0])')
timeout 150 python3 scripts/bench_docker.py --image "$IMG" --calls 30 2>&1 | tail -20

# Three things at once (a 10-minute device call): the hardening and GPU tests, oracles
# scored in per-problem containers, and (AGENT_PROBLEMS set) mt-all episodes whose tools
# run in the episode's container, with ncu's least privilege found there.
step "hardening + GPU tests with a GPU attached ($ngpu GPUs); oracles in containers; agent tools in containers"
( docker_tests 300 tests/docker/test_hardening.py tests/docker/test_gpu.py; echo "tests exit $?" ) &
jobs_running=($!)
( timeout 300 python3 scripts/gpu/docker_score_oracles.py --lock "$OUT/images.lock.json" --out "$OUT/docker_scores.json" \
    --gpus 0 --budget-s "${ORACLE_BUDGET_S:-150}" > "$OUT/docker_scores.log" 2>&1; echo "oracles exit $?" ) &
jobs_running+=($!)
if [ -n "${AGENT_PROBLEMS:-}" ]; then
    ( OUT="$OUT/agent" POPCORN_GPUS=${AGENT_GPU:-1} timeout 420 bash scripts/gpu/agent_mt_all.sh "$AGENT_PROBLEMS" docker \
        > "$OUT/agent_docker.log" 2>&1; echo "agent exit $?" ) &
    jobs_running+=($!)
fi
wait "${jobs_running[@]}"  # not a bare wait: dockerd runs in the background too
tail -40 "$OUT/docker_tests.log"; tail -15 "$OUT/docker_scores.log"; tail -30 "$OUT/agent/summary.txt" 2>/dev/null

leftovers
step done
