"""Each hardening of the docker sandbox, proven against a real container."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from orchestrator.config import REPO_ROOT

from .conftest import RUN_ID

pytestmark = pytest.mark.docker

def run_py(sandbox, code: str, timeout_s: float = 60, **kw):
    return sandbox.exec([sandbox.python, "-c", textwrap.dedent(code)], timeout_s=timeout_s, **kw)


def test_no_network(make_sandbox):
    sb = make_sandbox()
    r = run_py(sb, """
        import socket
        try:
            socket.create_connection(("192.0.2.1", 80), timeout=3)
            print("connected")
        except OSError as exc:
            print("refused", exc.errno)
        print(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
    """)
    assert r.returncode == 0, r.stderr
    assert "refused" in r.stdout and "connected" not in r.stdout
    assert "['lo']" in r.stdout


def test_root_read_only_workdir_writable_and_executable(make_sandbox):
    sb = make_sandbox()
    for path in ("/etc/passwd", "/popcorn/problem/reference.py", "/usr/bin/evil", "/opt/x"):
        r = sb.exec(["sh", "-c", f"echo x > {path}"], timeout_s=10)
        assert r.returncode != 0 and "Read-only file system" in r.stderr, (path, r)
    sb.put_files({"bin/hello.sh": b"#!/bin/sh\necho built-and-ran\n"})
    r = sb.exec(["sh", "-c", "chmod +x bin/hello.sh && ./bin/hello.sh"], timeout_s=10)
    assert r.stdout.strip() == "built-and-ran", r


def test_non_root_no_capabilities_no_new_privileges_seccomp(make_sandbox):
    sb = make_sandbox()
    r = sb.exec(["sh", "-c", "id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status"], timeout_s=10)
    lines = dict(line.split(":\t") for line in r.stdout.splitlines()[1:])
    assert r.stdout.splitlines()[0] == "1000"
    assert int(lines["CapEff"], 16) == 0 and int(lines["CapPrm"], 16) == 0
    assert lines["NoNewPrivs"].strip() == "1"
    assert lines["Seccomp"].strip() == "2"  # filter mode: the engine's default profile


def test_fork_bomb_stays_inside_pids_limit(make_sandbox):
    sb = make_sandbox(pids=64)
    r = run_py(sb, """
        import os, time
        children = 0
        try:
            while True:
                pid = os.fork()
                if pid == 0:
                    time.sleep(30); os._exit(0)
                children += 1
        except OSError as exc:
            print(children, exc.errno)
    """, timeout_s=20)
    count = int(r.stdout.split()[0])
    assert 10 < count < 64, r
    bomb = sb.exec(["bash", "-c", ":(){ :|:& };:"], timeout_s=5)
    assert bomb.timed_out or bomb.returncode != 0
    assert sb.exec(["true"], timeout_s=20).returncode == 0  # still usable afterwards


def test_memory_bomb_is_killed_and_classified(make_sandbox):
    sb = make_sandbox(memory_bytes=256 << 20, shm_bytes=16 << 20)
    r = run_py(sb, """
        chunks = []
        while True:
            chunks.append(bytearray(32 << 20))
    """, timeout_s=60)
    assert r.returncode == 137 and r.oom_killed and not r.timed_out, r
    assert sb.exec(["true"], timeout_s=10).returncode == 0


def test_hanging_call_killed_at_its_limit(make_sandbox):
    sb = make_sandbox()
    started = time.monotonic()
    r = sb.exec(["sh", "-c", "trap '' TERM; sleep 600"], timeout_s=2)
    elapsed = time.monotonic() - started
    assert r.timed_out and not r.success
    assert elapsed < 2 + 5 + 3 + 5, elapsed  # limit + inner kill grace + host margin + slack
    # a process that left the call's process group is killed from the host too
    r = sb.exec(["sh", "-c", "setsid sleep 600 & sleep 600"], timeout_s=2)
    assert r.timed_out
    ps = sb.exec(["ps", "-eo", "args"], timeout_s=10).stdout
    assert "sleep 600" not in ps, ps


def test_output_is_capped(make_sandbox):
    sb = make_sandbox(output_limit=1000)
    r = sb.exec(["sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x; echo done >&2"], timeout_s=30)
    assert r.truncated and len(r.stdout) == 1000 and r.stderr.strip() == "done"


def test_secrets_are_not_readable(make_sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-4242")
    monkeypatch.setenv("POPCORN_SEED", "918273645")
    sb = make_sandbox()
    r = sb.exec(["sh", "-c", "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ls -R /popcorn /work"],
                timeout_s=20)
    assert r.returncode == 0, r
    for secret in ("sk-test-secret-4242", "918273645", "OPENAI_API_KEY"):
        assert secret not in r.stdout
    # the image holds the problem without its solutions or tests (no reference outputs either)
    assert "reference.py" in r.stdout and "solutions" not in r.stdout and "oracle" not in r.stdout
    assert "test_reference" not in r.stdout


def test_files_round_trip(make_sandbox):
    sb = make_sandbox()
    blob = bytes(range(256)) * 100
    sb.put_files({"a/b/c.bin": blob, "x.txt": b"hi"})
    got = sb.get_files(["a/b/c.bin", "x.txt", "missing.txt"])
    assert got == {"a/b/c.bin": blob, "x.txt": b"hi"}
    with pytest.raises(ValueError):
        sb.put_files({"../escape": b""})


def test_stdin_reaches_the_command(make_sandbox):
    sb = make_sandbox()
    payload = json.dumps({"k": "v" * 200000}).encode()
    r = sb.exec([sb.python, "-c", "import sys, json; print(len(json.load(sys.stdin)['k']))"],
                timeout_s=30, stdin=payload)
    assert r.stdout.strip() == "200000", r


def test_labels_and_removal(make_sandbox, client):
    sb = make_sandbox(episode="label-check")
    container = client.containers.get(sb.container_id)
    assert container.labels["popcorn.run"] == RUN_ID and container.labels["popcorn.episode"] == "label-check"
    cid = sb.container_id
    sb.close()
    sb.close()  # idempotent
    assert not client.containers.list(all=True, filters={"id": cid})


def test_missing_image_and_no_engine_are_infra_errors(monkeypatch):
    from orchestrator.sandbox.base import SandboxSpec, SandboxUnavailable, create
    from orchestrator.sandbox.docker import engine_available

    if engine_available():  # a missing image needs an engine to be missing from
        with pytest.raises(SandboxUnavailable, match="popcorn/no-such-image:0"):
            create("docker", SandboxSpec(image="popcorn/no-such-image:0", run_id=RUN_ID))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert not engine_available()
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers at unix:///nonexistent"):
        create("docker", SandboxSpec(image="x", run_id=RUN_ID))


def test_sigkilled_orchestrator_leaves_nothing_after_prune(problem_image, client):
    run_id = f"{RUN_ID}-killed"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from orchestrator.sandbox.base import SandboxSpec, create
        sb = create("docker", SandboxSpec(image={problem_image!r}, run_id={run_id!r}, episode="e"))
        print(sb.container_id, flush=True)
        sb.exec(["sleep", "600"], timeout_s=600)
    """)], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))})
    cid = child.stdout.readline().strip()
    assert cid
    time.sleep(1)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert client.containers.list(filters={"id": cid}), "the container should outlive a SIGKILL"
    prune = subprocess.run([sys.executable, "-m", "orchestrator", "sandbox", "prune", "--orphans"],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert prune.returncode == 0, prune.stderr
    assert run_id in prune.stdout
    assert not client.containers.list(all=True, filters={"label": f"popcorn.run={run_id}"})
