"""scripts/bench_gpu_lock.py replays a pass's holds on the real GPU lock with sleeps, and the
lock's rule that it measured: a timing that comes while others wait joins them ahead of trials."""
import json
import subprocess
import sys
import threading
import time

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.runner.judge import gpu_lock

SCRIPT = REPO_ROOT / "scripts" / "bench_gpu_lock.py"


@pytest.mark.parametrize("together", [True, False])
def test_a_timing_joins_the_queued_ones_ahead_of_trials_that_waited_longer(tmp_path, together):
    """Trial 2 waits behind timing 1, then timing 2 comes: the two timings run back to back and
    trial 2 after them, so the running trials drain once for both. The earlier turnstile
    (`writers_together=False`, what the replay compares with) let trial 2 in first, and timing 2
    then waited for it to drain."""
    lock = str(tmp_path / "gpu0.lock")
    events: list[str] = []

    def hold(name: str, shared: bool, seconds: float) -> None:
        with gpu_lock(lock, shared=shared, writers_together=together):
            events.append(f"{name} in")
            time.sleep(seconds)
            events.append(f"{name} out")

    order = [("trial 1", True, 1.2), ("timing 1", False, 0.4), ("trial 2", True, 0.1), ("timing 2", False, 0.4)]
    threads = []
    for name, shared, seconds in order:  # each starts while trial 1 still holds the GPU
        threads.append(threading.Thread(target=hold, args=(name, shared, seconds)))
        threads[-1].start()
        time.sleep(0.15)
    for t in threads:
        t.join(timeout=10)
    then = ["timing 2", "trial 2"] if together else ["trial 2", "timing 2"]
    assert events == ["trial 1 in", "trial 1 out", "timing 1 in", "timing 1 out",
                      f"{then[0]} in", f"{then[0]} out", f"{then[1]} in", f"{then[1]} out"]


def _row(name: str, timing_alone: float, started: str) -> dict:
    return {"problem": name, "started_at": started, "episode_wall_s": timing_alone + 2.0,
            "stage_wall_s": {"load": 1.0, "correctness": 0.5, "stress": 0.5, "timing": timing_alone},
            "stage_lock_wait_s": {"load": 0.0, "correctness": 0.0, "stress": 0.0, "timing": 0.0},
            "gpu_spans": [[0, 1]], "ncu_profiled_s": None}


def test_a_replay_serializes_the_holds_alone_and_overlaps_the_rest(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(_row(f"p{i}", 10.0, f"t{i}")) + "\n" for i in range(3)))
    out = subprocess.run([sys.executable, str(SCRIPT), str(rows), "--parallel", "3", "--scale", "0.02",
                          "--timing-scale", "1", "--timing-scale", "0.5"],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "3 episodes of rows.jsonl, 3 at a time, replayed at 0.02x"
    walls = {float(line.split()[1]): float(line.split()[3]) for line in lines[3:]}
    # three 10 s timings cannot overlap; the shared 2 s of each episode overlaps the others
    assert 30 <= walls[1.0] < 40 and 15 <= walls[0.5] < 25


def test_rows_that_are_not_a_pass_are_refused_in_one_line(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"problem": "x"}) + "\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(rows)], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "line 1 lacks" in out.stderr
