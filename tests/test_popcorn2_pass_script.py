"""scripts/gpu/popcorn2_pass.sh on the CPU: a one-episode Popcorn2 oracle pass, detached and segmented,
and the order a fresh pass takes from earlier passes' rows (its GPU runs are in docs/verification.md)."""
import glob
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu" / "popcorn2_pass.sh"
PROBLEM = "graph/l1/csr_spmv"
# Settings of the caller's shell that would change what the script does.
_SCRIPT_ENV = ("PASS_DETACH", "PASS_S", "WAIT_S", "PASS_LABEL", "PASS_ORDER_FROM_EARLIER", "COMMIT", "GPU",
               "MAX_PARALLEL", "PROBLEMS", "STRESS", "DEVICE", "OUT", "PASS_DIR")


def _run(pass_dir: Path, out: Path, **env) -> subprocess.CompletedProcess:
    """One call of the script on the CPU, in a session of its own, with the venv's python3 first on PATH."""
    base = {k: v for k, v in os.environ.items() if k not in _SCRIPT_ENV and not k.startswith("POPCORN_")}
    base.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", DEVICE="cpu",
                STRESS="1", PROBLEMS=PROBLEM, PASS_DIR=str(pass_dir), OUT=str(out), **env)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=base, timeout=300,
                          start_new_session=True)


def _our_processes(pass_dir: Path) -> set[int]:
    """The processes our calls started: those with our PASS_DIR in their environment, the rest of their
    sessions, and all their descendants (the local sandbox's judges run in sessions of their own, with
    an environment of their own)."""
    marker, own_sid, procs = f"PASS_DIR={pass_dir}".encode(), os.getsid(0), {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                procs[int(entry.name)] = (int(stat[stat.rindex(")") + 2:].split()[1]), os.getsid(int(entry.name)),
                                          marker in (entry / "environ").read_bytes().split(b"\0"))
            except (OSError, ValueError):
                continue
    sids = {sid for _, sid, marked in procs.values() if marked} - {own_sid}
    ours = {pid for pid, (_, sid, marked) in procs.items() if sid in sids or (marked and sid != own_sid)}
    while True:
        children = {pid for pid, (ppid, _, _) in procs.items() if ppid in ours} - ours
        if not children:
            return ours - {os.getpid()}
        ours |= children


def _kill_leftovers(pass_dir: Path) -> None:
    """Stop, then kill, every process our calls left (the detached pass's included), pass or fail."""
    stopped: set[int] = set()
    for _ in range(10):  # stop the tree until no new process appears, so none escapes by forking meanwhile
        new = _our_processes(pass_dir) - stopped
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped |= new
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while stopped and time.monotonic() < deadline:
        stopped = {pid for pid in stopped if _alive(pid)}
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie that init has yet to reap does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def detached(tmp_path_factory):
    """One detached pass: a first call that returns before the pass ends, then a call that waits for it."""
    root = tmp_path_factory.mktemp("detached")
    pass_dir = root / "pass"
    try:
        first = _run(pass_dir, root / "out1", WAIT_S="1")
        state = {"started": (pass_dir / "detached.started").is_file(), "done": (pass_dir / "detached.done").is_file()}
        second = _run(pass_dir, root / "out2", WAIT_S="240")
        yield {"first": first, "after_first": state, "second": second, "pass_dir": pass_dir, "out": root / "out2"}
    finally:
        _kill_leftovers(pass_dir)


def test_a_detached_pass_outlives_the_call_that_started_it(detached):
    """The first call returns while the pass runs on; a later one waits for its end and summarizes it:
    one segment, one passed row, the run's records without the repository's copy."""
    first, second, pass_dir, out = detached["first"], detached["second"], detached["pass_dir"], detached["out"]
    assert first.returncode == 0, first.stderr[-2000:]
    assert "started the detached pass" in first.stdout
    assert detached["after_first"]["started"]
    if not detached["after_first"]["done"]:  # a machine fast enough to finish within the first wait skips this
        assert "(the pass is still running)" in first.stdout
    assert second.returncode == 0, second.stderr[-2000:]
    assert "started the detached pass" not in second.stdout and "still running" not in second.stdout
    assert (pass_dir / "detached.done").is_file()
    (segment,) = (pass_dir / "segments.txt").read_text().split()
    assert float(segment) > 0
    (row,) = [json.loads(line) for line in _lines(out / "pass_rows.jsonl")]
    assert (row["problem"], row["status"]) == (PROBLEM, "passed")
    assert (out / "popcorn2_pass.txt").read_text().startswith("episodes 1 of 34 ({'passed': 1}); segments 1: ")
    with tarfile.open(out / "pass_run.tar.gz") as tar:
        names = tar.getnames()
    assert "./popcorn2-pass/episodes.jsonl" in names and "./segments.txt" in names
    assert not [name for name in names if name.startswith("./repo")]


def test_a_fresh_pass_is_ordered_by_earlier_passes_rows(detached):
    """A fresh pass writes one record per passed row with an episode time of the repository's
    docs/verification-data/*-pass*.jsonl, as an oracle episode of that wall time."""
    rows = [json.loads(line) for path in glob.glob(str(REPO / "docs/verification-data/*-pass*.jsonl"))
            for line in _lines(Path(path))]
    expected = sorted((row["problem"], row["episode_wall_s"]) for row in rows if row.get("status") == "passed"
                      and isinstance(row.get("episode_wall_s"), (int, float))
                      and not isinstance(row["episode_wall_s"], bool))
    assert expected, "no earlier pass rows to order by"
    records = [json.loads(line) for line in _lines(detached["pass_dir"] / "earlier-passes" / "episodes.jsonl")]
    assert sorted((r["problem"], r["wall_s"]) for r in records) == expected
    assert all((r["kind"], r["model"], r["harness"], r["status"]) == ("episode", "oracle", "st", "completed")
               for r in records)


def test_segmented_calls_resume_the_same_run(tmp_path):
    """Each segmented call logs one segment; the second resumes the run (no episode re-run, no new
    order records) rather than starting a fresh one."""
    pass_dir = tmp_path / "pass"
    try:
        first = _run(pass_dir, tmp_path / "out1", PASS_DETACH="0", PASS_S="300")
        assert first.returncode == 0, first.stderr[-2000:]
        assert len(_lines(pass_dir / "segments.txt")) == 1
        assert len(_lines(pass_dir / "popcorn2-pass" / "episodes.jsonl")) == 1
        (row,) = [json.loads(line) for line in _lines(tmp_path / "out1" / "pass_rows.jsonl")]
        assert (row["problem"], row["status"]) == (PROBLEM, "passed")
        seed = pass_dir / "earlier-passes" / "episodes.jsonl"
        assert seed.is_file()
        seed.unlink()  # a resumed call must not write it again
        second = _run(pass_dir, tmp_path / "out2", PASS_DETACH="0", PASS_S="300")
        assert second.returncode == 0, second.stderr[-2000:]
        segments = _lines(pass_dir / "segments.txt")
        assert len(segments) == 2 and all(float(s) > 0 for s in segments)
        assert len(_lines(pass_dir / "popcorn2-pass" / "episodes.jsonl")) == 1
        assert not seed.exists()
        assert "0 episode(s) to run" in (tmp_path / "out2" / "pass.log").read_text()
        assert (tmp_path / "out2" / "popcorn2_pass.txt").read_text().startswith(
            "episodes 1 of 34 ({'passed': 1}); segments 2: ")
    finally:
        _kill_leftovers(pass_dir)


def test_a_detached_pass_that_is_gone_is_reported_not_waited_for(tmp_path):
    """A pass whose process died without finishing (a fresh machine, a stray kill) fails the next
    call at once with a line saying so, instead of waiting WAIT_S on every call."""
    pass_dir = tmp_path / "pass"
    pass_dir.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (pass_dir / "detached.started").write_text(f"{time.time()}\n")
    (pass_dir / "detached.pid").write_text(f"{dead.pid}\n")
    t0 = time.monotonic()
    result = _run(pass_dir, tmp_path / "out", WAIT_S="120")
    assert result.returncode == 1
    assert "is gone without finishing" in result.stderr and str(pass_dir) in result.stderr
    assert time.monotonic() - t0 < 60
