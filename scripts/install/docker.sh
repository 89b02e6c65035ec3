#!/usr/bin/env bash
# Install Debian's Docker engine (docker.io) and the registry used by the image tests,
# and start dockerd if no engine answers. Idempotent and quiet; fails loudly.
set -euo pipefail

log=/tmp/popcorn-dockerd.log
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-registry >/dev/null || need+=(docker-registry)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

engine_answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start_dockerd() {
    nohup dockerd >"$log" 2>&1 &
    for _ in $(seq 120); do engine_answers && return 0; sleep 1; done
    return 1
}

if ! engine_answers; then
    # No systemd here (containers, CI): start the daemon ourselves, detached. A daemon
    # that is running but not answering (a racing start, a stale containerd) is stopped
    # and started once more.
    if pgrep -x dockerd >/dev/null; then
        for _ in $(seq 60); do engine_answers && break; sleep 1; done
    fi
    if ! engine_answers; then
        pkill -x dockerd 2>/dev/null || true; pkill -x containerd 2>/dev/null || true; sleep 2
        rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
        start_dockerd || {
            pkill -x dockerd 2>/dev/null || true; pkill -x containerd 2>/dev/null || true; sleep 3
            rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
            start_dockerd
        } || { echo "docker.sh: dockerd did not answer; see $log" >&2; tail -20 "$log" >&2; exit 1; }
    fi
fi
echo "docker.sh: engine $(docker version --format '{{.Server.Version}}') ready"
