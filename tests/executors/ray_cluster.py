"""A real Ray cluster on this machine for the executor tests: a head and worker nodes,
each its own GCS/raylet processes, all bound to 127.0.0.1, the workers declaring fake
GPUs (Ray only counts them; CUDA_VISIBLE_DEVICES is set per task as on a GPU node).

`ray start` cannot do this: on Linux it turns 127.0.0.1 into the machine's external
address, and with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (loopback) it refuses worker
nodes. ray.cluster_utils.Cluster, Ray's own multi-node test harness, starts the same
processes and keeps their ids, so teardown stops exactly the processes it started
(`ray stop --force` would kill every Ray process of the machine, other users' too).

    python tests/executors/ray_cluster.py    # hold a cluster for manual runs; Ctrl-C stops it
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Iterator

REPO_ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",   # node IP = 127.0.0.1 (read when ray is imported)
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_period_ms": "1000",       # notice a dead node in seconds, not half a minute
    "RAY_health_check_failure_threshold": "3",
}


def driver_env() -> dict[str, str]:
    """Environment of a driver process (python -m orchestrator run) for this cluster."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **LOOPBACK_ENV, "PYTHONPATH": path}


@contextlib.contextmanager
def local_cluster(workers: int = 2, gpus_per_worker: int = 2, cpus_per_worker: int = 2) -> Iterator[Any]:
    """Yield a started ray.cluster_utils.Cluster; always shut down, also on failure."""
    saved = {k: os.environ.get(k) for k in [*LOOPBACK_ENV, "PYTHONPATH"]}
    os.environ.update(driver_env())            # the nodes' processes inherit it (worker imports)
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", False):
        raise RuntimeError("ray was imported before the loopback setting; nodes would bind a public address")
    from ray.cluster_utils import Cluster

    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0,
                                                                "include_dashboard": False})
        for _ in range(workers):
            cluster.add_node(num_cpus=cpus_per_worker, num_gpus=gpus_per_worker)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


if __name__ == "__main__":
    import signal
    import time

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # kill PID stops the cluster too
    with local_cluster() as held:
        print(f"Ray cluster at {held.address}; env for drivers: "
              + " ".join(f"{k}={v}" for k, v in LOOPBACK_ENV.items()), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
