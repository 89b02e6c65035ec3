"""The local sandbox: no network, no leaked secrets, limits, and the kill."""
from __future__ import annotations

import os
import socket
import sys
import textwrap
import time

import pytest

from orchestrator.sandbox.base import SandboxSpec, create
from orchestrator.sandbox.local import namespace_prefix

pytestmark = pytest.mark.skipif(namespace_prefix() is None, reason="this host refuses network namespaces")


def run_py(sb, code: str, timeout: float = 60):
    return sb.exec([sys.executable, "-c", textwrap.dedent(code)], timeout_s=timeout)


@pytest.fixture
def sandbox():
    sb = create("local", SandboxSpec(run_id="test", memory_bytes=512 << 20, pids=64))
    yield sb
    sb.close()


def test_files_round_trip_and_cannot_escape(sandbox):
    sandbox.put_files({"a/b.txt": b"hello"})
    assert sandbox.get_files(["a/b.txt", "missing"]) == {"a/b.txt": b"hello"}
    r = sandbox.exec(["cat", "a/b.txt"], timeout_s=10)
    assert r.success and r.stdout == "hello"
    with pytest.raises(ValueError):
        sandbox.put_files({"../outside": b"x"})


def test_no_network(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        r = run_py(sandbox, f"""
            import socket
            s = socket.socket(); s.settimeout(3)
            try:
                s.connect(("127.0.0.1", {port})); print("CONNECTED")
            except OSError as e:
                print("BLOCKED", e)
        """)
        assert "BLOCKED" in r.stdout, r.stdout + r.stderr
        # the control: the same connection from the host works
        c = socket.create_connection(("127.0.0.1", port), timeout=3)
        c.close()
    finally:
        server.close()


def test_no_secrets_in_the_environment(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    monkeypatch.setenv("POPCORN_SEED", "424242")
    r = sandbox.exec(["env"], timeout_s=10)
    assert r.success
    assert "sk-test-secret-123" not in r.stdout and "424242" not in r.stdout
    assert "PATH=" in r.stdout


def test_timeout_kills_the_whole_tree_including_setsid_daemons(sandbox):
    t0 = time.monotonic()
    r = sandbox.exec(["sh", "-c", "setsid sleep 300 & echo $! > daemon.pid; sleep 300"], timeout_s=2)
    assert r.timed_out and not r.success
    assert time.monotonic() - t0 < 30
    # the daemon lived in the sandbox's PID namespace: nothing named 'sleep 300' survives
    time.sleep(0.5)
    survivors = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == "sleep\x00300\x00"]
    assert survivors == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read()
    except OSError:
        return ""


def test_memory_limit(sandbox):
    r = run_py(sandbox, "x = bytearray(2 << 30); print('ALLOCATED')")
    assert not r.success and "ALLOCATED" not in r.stdout


def test_process_limit_stops_a_fork_bomb(sandbox):
    r = run_py(sandbox, """
        import os, time
        n = 0
        for _ in range(500):
            try:
                if os.fork() == 0:
                    time.sleep(5); os._exit(0)
                n += 1
            except OSError:
                break
        print("FORKED", n)
    """)
    forked = int(r.stdout.split("FORKED")[1].split()[0])
    assert forked < 64, r.stdout


def test_output_is_capped():
    sb = create("local", SandboxSpec(output_limit=1000))
    try:
        r = sb.exec([sys.executable, "-c", "print('x' * 100000)"], timeout_s=30)
        assert r.truncated and len(r.stdout) == 1000
    finally:
        sb.close()


def test_close_removes_the_working_directory():
    sb = create("local", SandboxSpec())
    work = sb.workdir
    sb.put_files({"f": b"1"})
    sb.close()
    sb.close()  # idempotent
    assert not os.path.exists(work)


def test_oracle_solutions_and_results_are_hidden(sandbox):
    from orchestrator.config import REPO_ROOT

    oracle = REPO_ROOT / "problems/graph/l1/csr_spmv/solutions/oracle.py"
    assert oracle.is_file()
    r = sandbox.exec(["cat", str(oracle)], timeout_s=10)
    assert not r.success and "ModelNew" not in r.stdout
    r = sandbox.exec(["ls", str(REPO_ROOT / "problems")], timeout_s=10)
    assert r.stdout.strip() == ""
    # the runner's own code stays importable
    r = run_py(sandbox, "import orchestrator.runner.judge; print('RUNNER OK')")
    assert "RUNNER OK" in r.stdout, r.stderr
    assert oracle.is_file(), "hiding must not touch the host's view"


def test_gpu_lock_is_exclusive_for_timing_and_shared_for_trials(tmp_path):
    import threading

    from orchestrator.runner.judge import gpu_lock

    path = str(tmp_path / "gpu0.lock")
    events: list[str] = []
    with gpu_lock(path, shared=True):
        with gpu_lock(path, shared=True):  # readers share
            events.append("two readers")

        def writer():
            with gpu_lock(path):
                events.append("writer")

        t = threading.Thread(target=writer)
        t.start()
        time.sleep(0.3)
        assert "writer" not in events  # waits for the reader
    t.join(5)
    assert events == ["two readers", "writer"]


def test_multi_gpu_lock_holds_every_gpu_of_the_evaluation(tmp_path):
    import threading

    from orchestrator.runner.judge import gpu_lock

    gpu0, gpu1 = str(tmp_path / "gpu0.lock"), str(tmp_path / "gpu1.lock")
    events: list[str] = []

    def single_gpu_timing():
        with gpu_lock(gpu1):
            events.append("gpu1 timed")

    with gpu_lock(f"{gpu1},{gpu0}"):  # a two-GPU timing, in any order of names
        t = threading.Thread(target=single_gpu_timing)
        t.start()
        time.sleep(0.3)
        assert events == []  # the one-GPU timing on GPU 1 waits
        events.append("pair timed")
    t.join(5)
    assert events == ["pair timed", "gpu1 timed"]


def test_a_long_wait_for_the_gpu_lock_is_reported_and_a_free_lock_is_not(tmp_path):
    import threading

    from orchestrator.runner.judge import gpu_lock

    path = str(tmp_path / "gpu0.lock")
    waits: list[float] = []
    with gpu_lock(path, waited=waits.append):
        pass
    assert waits == []  # no wait, no report
    release = threading.Event()

    def holder():
        with gpu_lock(path):
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    time.sleep(0.2)
    threading.Timer(2.5, release.set).start()
    with gpu_lock(path, shared=True, waited=waits.append):
        pass
    t.join(5)
    assert len(waits) == 1 and 2.2 < waits[0] < 8


def test_thread_pools_follow_the_sandbox_cpus():
    from orchestrator.sandbox.base import SandboxSpec, create

    with create("local", SandboxSpec(run_id="t", episode="threads", cpus=1)) as sb:  # this host may have only 2
        r = sb.exec([sb.python, "-c", "import os, torch; print(os.environ['OMP_NUM_THREADS'], torch.get_num_threads())"],
                    timeout_s=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1"]
