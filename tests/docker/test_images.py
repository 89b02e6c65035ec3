"""Image layers: content-hash tags, skip unchanged, failures named with their log, the
lock file written atomically, and publishing through a real registry on 127.0.0.1."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import docker.errors
import pytest

from orchestrator.config import REPO_ROOT, Settings

from .conftest import PROBLEM

EXAMPLE = REPO_ROOT / "problems" / PROBLEM


def copy_problem(root: Path, problem_id: str = PROBLEM) -> Path:
    dest = root / problem_id
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def specs_by_name(problems_dir: Path):
    from orchestrator.images import plan

    return {s.name: s for s in plan(Settings(problems_dir=problems_dir, translation_dir=problems_dir / "none"),
                                    toolchain="toolchain:x")}


def test_tags_hash_what_went_into_each_layer(tmp_path):
    folder = copy_problem(tmp_path)
    before = {n: s.tag for n, s in specs_by_name(tmp_path).items()}
    (folder / "solutions" / "oracle.py").write_text("# edited: solutions are not in the image\n")
    (folder / "test_reference.py").write_text("# tests are not in the image either\n")
    assert {n: s.tag for n, s in specs_by_name(tmp_path).items()} == before
    (folder / "reference.py").write_text((folder / "reference.py").read_text() + "\n# changed\n")
    after = {n: s.tag for n, s in specs_by_name(tmp_path).items()}
    name = "popcorn/" + PROBLEM
    assert after[name] != before[name]
    assert after["popcorn/graph"] == before["popcorn/graph"] and after["popcorn/base"] == before["popcorn/base"]
    context = specs_by_name(tmp_path)[name].context
    assert "reference.py" in context and not any("solutions" in k or "test_" in k for k in context)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.docker
def test_missing_dockerfile_is_named(tmp_path, toolchain):
    folder = copy_problem(tmp_path)
    (folder / "Dockerfile").unlink()
    lock = tmp_path / "lock.json"
    proc = run_cli("images", "build", "--quiet", "--toolchain", toolchain, "--lock", str(lock),
                   env={"POPCORN_PROBLEMS_DIR": str(tmp_path)})
    assert proc.returncode == 2 and f"no Dockerfile: {folder / 'Dockerfile'}" in proc.stderr, proc.stderr
    assert not lock.exists()


@pytest.mark.docker
def test_failing_dockerfile_names_itself_and_its_log_and_writes_no_lock(tmp_path, toolchain):
    folder = copy_problem(tmp_path)
    (folder / "Dockerfile").write_text((folder / "Dockerfile").read_text() + "RUN exit 3\n")
    lock = tmp_path / "lock.json"
    proc = run_cli("images", "build", "--quiet", "--toolchain", toolchain, "--lock", str(lock),
                   env={"POPCORN_PROBLEMS_DIR": str(tmp_path)})
    assert proc.returncode == 1
    line = next(l for l in proc.stderr.splitlines() if l.startswith("error:"))
    assert str(folder / "Dockerfile") in line and "log: " in line, proc.stderr
    log = Path(line.rsplit("log: ", 1)[1].rstrip(")"))
    assert "exit 3" in log.read_text() or "returned a non-zero code: 3" in log.read_text()
    assert not lock.exists()


@pytest.mark.docker
def test_second_build_skips_unchanged(built, toolchain, tmp_path):
    lock = tmp_path / "again.json"
    proc = run_cli("images", "build", "--quiet", "--only", PROBLEM, "--toolchain", toolchain, "--lock", str(lock))
    assert proc.returncode == 0, proc.stderr
    assert "0 built, 3 unchanged" in proc.stdout
    assert json.loads(lock.read_text())["images"] == json.loads(built.read_text())["images"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """Debian's docker-registry serving on 127.0.0.1 (the engine trusts loopback)."""
    binary = shutil.which("docker-registry")
    if not binary:
        pytest.skip("docker-registry is not installed (scripts/install/docker.sh installs it)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'store'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.mark.docker
def test_publish_pull_by_digest_and_rerun(built, client, registry, tmp_path):
    from .test_scoring import score_oracle

    lock = tmp_path / "images.lock.json"
    shutil.copy(built, lock)
    proc = run_cli("images", "push", "--registry", registry, "--lock", str(lock))
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(lock.read_text())["images"]
    assert all(e["digest"].startswith("sha256:") and e["repository"].startswith(registry) for e in entries)
    first = score_oracle(lock)
    assert first["verdict"]["failure_class"] is None, first

    problem = next(e for e in entries if e["problem"] == PROBLEM)
    # Remove the local copies, leaf first, so the rerun's image comes from the registry
    # (a parent layer that other local images build on stays, untagged).
    for entry in sorted(entries, key=lambda e: e["kind"] != "problem"):
        image = client.images.get(entry["id"])
        for reference in image.tags + (image.attrs.get("RepoDigests") or []):  # digest refs of earlier pulls too
            with contextlib.suppress(docker.errors.NotFound):  # gone with its repository's tag
                client.images.remove(reference, force=True)
    assert not _present(client, problem["id"])

    proc = run_cli("images", "pull", "--lock", str(lock))
    assert proc.returncode == 0, proc.stderr
    assert _present(client, problem["id"])
    second = score_oracle(lock)
    assert second["image_digest"] == f"{problem['repository']}@{problem['digest']}" == first["image_digest"]
    assert second["image_ref"] == problem["id"]
    assert second["sandbox_image_digest"] == first["sandbox_image_digest"] == problem["id"]
    assert _verdict_core(second["verdict"]) == _verdict_core(first["verdict"])

    # a lock file whose digest does not match what the registry serves: one clear line, non-zero
    bad = json.loads(lock.read_text())
    bad["images"][0]["digest"] = "sha256:" + "0" * 64
    bad_path = tmp_path / "bad.lock.json"
    bad_path.write_text(json.dumps(bad))
    proc = run_cli("images", "pull", "--lock", str(bad_path))
    assert proc.returncode == 2 and "cannot pull" in proc.stderr and "sha256:000" in proc.stderr


@pytest.mark.docker
def test_registry_that_refuses_is_one_line(built, tmp_path):
    lock = tmp_path / "images.lock.json"
    shutil.copy(built, lock)
    before = lock.read_text()
    proc = run_cli("images", "push", "--registry", f"127.0.0.1:{_free_port()}", "--lock", str(lock), timeout=300)
    assert proc.returncode == 2 and proc.stderr.startswith("error: registry 127.0.0.1:"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert lock.read_text() == before  # no partial lock file


def _present(client, image_id: str) -> bool:
    import docker.errors

    try:
        client.images.get(image_id)
        return True
    except docker.errors.ImageNotFound:
        return False


def _verdict_core(verdict: dict) -> dict:
    return {"failure_class": verdict["failure_class"], "passed_disclosed": verdict["passed_disclosed"],
            "stages": {k: v.get("status") for k, v in verdict["stages"].items()}}


@pytest.mark.docker
def test_clean_removes_outdated_builds_and_keeps_the_locked_ones(built, client, tmp_path):
    import io

    name = "popcorn/" + PROBLEM
    stale, _ = client.images.build(fileobj=io.BytesIO(f"FROM scratch\nLABEL popcorn.image={name} stale=1\n".encode()),
                                   tag=f"{name}:stale-test", rm=True)
    other, _ = client.images.build(fileobj=io.BytesIO(b"FROM scratch\nLABEL popcorn.image=popcorn/not-locked\n"),
                                   tag="popcorn/not-locked:test", rm=True)
    try:
        proc = run_cli("images", "clean", "--lock", str(built))
        assert proc.returncode == 0, proc.stderr
        assert not _present(client, stale.id)
        assert _present(client, other.id)  # not named in the lock: another checkout's business
        assert all(_present(client, e["id"]) for e in json.loads(built.read_text())["images"])
        assert run_cli("images", "clean", "--lock", str(tmp_path / "none.json")).returncode == 2
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            client.images.remove("popcorn/not-locked:test", force=True)
