"""Fixtures for the docker backend and image tests: a toolchain image from this host's
Python (no registry), the real base/domain/problem layers on top, and a check that
no container of this session is left behind."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT

RUN_ID = f"pytest-{os.getpid()}"
PROBLEM = "graph/l1/csr_spmv"
# The GPU machine (scripts/gpu/docker_on_device.sh) runs these tests on a skeleton
# toolchain with the host's /usr and /opt bound in, and a GPU attached to every sandbox.
TOOLCHAIN = os.environ.get("POPCORN_TEST_DOCKER_TOOLCHAIN")
GPUS = tuple(int(g) for g in os.environ.get("POPCORN_TEST_DOCKER_GPUS", "").split(",") if g)


def _engine_or_skip():
    from orchestrator.sandbox.docker import engine_available

    if not engine_available():
        pytest.skip("no Docker engine answers (scripts/install/docker.sh starts one)")
    import docker

    return docker.from_env(timeout=1800)


@pytest.fixture(scope="session")
def client():
    c = _engine_or_skip()
    yield c
    from orchestrator.sandbox.commands import leftovers

    left = leftovers(c, RUN_ID)
    names = [x.name for x in left]
    for container in left:
        container.remove(force=True)
    assert not names, f"containers left after the suite: {names}"
    c.close()


@pytest.fixture(scope="session")
def toolchain(client) -> str:
    from orchestrator.images import build_host_toolchain

    return TOOLCHAIN or build_host_toolchain(client, "python", python=sys.executable)


@pytest.fixture(scope="session")
def built(client, toolchain, tmp_path_factory) -> Path:
    """The csr_spmv image chain built on the host toolchain; returns its lock file."""
    import subprocess

    lock = tmp_path_factory.mktemp("lock") / "images.lock.json"
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "images", "build", "--quiet", "--only", PROBLEM,
                           "--toolchain", toolchain, "--lock", str(lock)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return lock


@pytest.fixture(scope="session")
def problem_image(built) -> str:
    from orchestrator.images import resolve_image

    return resolve_image(PROBLEM, built)[0]


@pytest.fixture
def make_sandbox(problem_image):
    from orchestrator.sandbox.base import SandboxSpec, create

    made = []

    def make(**overrides):
        spec = SandboxSpec(**{"image": problem_image, "run_id": RUN_ID, "episode": "test",
                              "memory_bytes": 1 << 30, "pids": 128, "cpus": 1.0, "gpus": GPUS,
                              **overrides})
        sandbox = create("docker", spec)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()
