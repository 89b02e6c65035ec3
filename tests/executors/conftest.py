"""Fixtures of the executor tests: one real Ray cluster (head + two worker nodes with
two fake GPUs and four CPUs each, bound to 127.0.0.1) per module that asks for it, always stopped."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import importlib.util

    if importlib.util.find_spec("ray") is None:   # found, not imported: ray reads its settings on import
        pytest.skip("Ray is not installed (scripts/install/executors.sh installs it)")
    from ray_cluster import local_cluster

    with local_cluster(workers=2, gpus_per_worker=2, cpus_per_worker=4) as cluster:
        yield cluster
