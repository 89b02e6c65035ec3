"""The judges' GPU load (runner/gpuload.py): it runs only while a loaded trial's call runs, and a
kernel whose result changes in that company fails correctness with the load named.

On a CPU the same process loads a core with the same protocol, so what is checked here is the
protocol and the judge's use of it; that the load brings out a real race on a GPU is the
fa2-bwd reference's (scripts/gpu/fa2_bwd_race.py, docs/verification.md)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.errors import InfraError
from orchestrator.runner.gpuload import GpuLoad
from orchestrator.runner.judge import parse_verdict

PROBLEM = REPO_ROOT / "problems" / "graph" / "l1" / "csr_spmv"
HONEST = REPO_ROOT / "tests" / "hacks" / "honest_torch.py"


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_the_load_runs_only_between_run_and_pause() -> None:
    load = GpuLoad("cpu", mib=8)
    try:
        with load.running() as info:
            pid = load.proc.pid
            before = _cpu_ticks(pid)
            time.sleep(0.5)
            during = _cpu_ticks(pid) - before
        assert info["load_iterations"] > 0
        before = _cpu_ticks(pid)
        time.sleep(0.5)
        paused = _cpu_ticks(pid) - before
        assert during >= 10 and paused <= 2, (during, paused)  # clock ticks of 10 ms: busy, then idle
        with load.running() as again:
            pass
        assert again["load_iterations"] >= 0 and load.proc.pid == pid  # one process per judge
    finally:
        load.close()


def test_a_load_process_that_died_is_the_judges_error_in_one_line() -> None:
    load = GpuLoad("cpu", mib=8)
    with load.running():
        pass
    load.proc.kill()
    load.proc.wait()
    with pytest.raises(InfraError) as err:
        with load.running():
            pass
    assert str(err.value).startswith("the GPU load process ") and "\n" not in str(err.value)


WRONG_IN_COMPANY = '''

def _loaded() -> bool:
    import os
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"orchestrator.runner.gpuload" in open(f"/proc/{pid}/cmdline", "rb").read():
                return True
        except OSError:
            pass
    return False


class ModelNew(ModelNew):
    def forward(self, *args):
        out = super().forward(*args)
        return out * 1.5 if _loaded() else out
'''


def _verdict(tmp_path: Path, solution: Path, loaded_trials: int | None) -> dict:
    nonce = "cd" * 32
    job = {"problem_dir": str(PROBLEM), "solution": str(solution), "device": "cpu", "mode": "check", "seed": 5,
           "stress": 1, "trials": 3, "nonce": nonce, "log_path": str(tmp_path / "cand.log")}
    if loaded_trials is not None:
        job["loaded_trials"] = loaded_trials
    proc = subprocess.run([sys.executable, "-m", "orchestrator.runner.judge"], input=json.dumps(job), text=True,
                          capture_output=True, cwd=REPO_ROOT, timeout=300)
    verdict = parse_verdict(proc.stdout, nonce)
    assert verdict is not None, proc.stderr[-2000:]
    return verdict


def test_loaded_trials_run_with_the_load_and_none_by_default_on_a_cpu(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, HONEST, loaded_trials=2)
    assert verdict["failure_class"] is None, verdict["failure_detail"]
    loaded = [t for t in verdict["stages"]["correctness"]["trials"] if t["kind"] == "loaded"]
    assert len(loaded) == 2 and all(t["passed"] and "load_iterations" in t for t in loaded)
    default = _verdict(tmp_path, HONEST, loaded_trials=None)
    assert not any(t["kind"] == "loaded" for t in default["stages"]["correctness"]["trials"])


def test_a_result_that_changes_beside_the_load_is_incorrect_and_says_so(tmp_path: Path) -> None:
    solution = tmp_path / "wrong_in_company.py"
    solution.write_text(HONEST.read_text() + WRONG_IN_COMPANY)
    verdict = _verdict(tmp_path, solution, loaded_trials=2)
    assert verdict["failure_class"] == "incorrect", verdict["failure_detail"]
    assert verdict["failure_detail"].startswith("loaded trial at shape ")
    assert "another process loading the GPU" in verdict["failure_detail"]
    kinds = [(t["kind"], t["passed"]) for t in verdict["stages"]["correctness"]["trials"]]
    assert kinds[:4] == [("fresh", True), ("in_place", True), ("fresh", True), ("repeat", True)]
    assert kinds[4] == ("loaded", False)


@pytest.mark.gpu
def test_on_a_gpu_the_load_runs_during_the_body_and_an_honest_submission_passes_beside_it(tmp_path: Path) -> None:
    load = GpuLoad("cuda:0")
    try:
        with load.running() as info:
            time.sleep(0.3)
        assert info["load_iterations"] > 10  # each is a 4096^3 matmul and a 256 MiB copy: well under 30 ms
    finally:
        load.close()
    nonce = "ef" * 32
    job = {"problem_dir": str(PROBLEM), "solution": str(HONEST), "device": "cuda", "mode": "check", "seed": 5,
           "stress": 1, "trials": 3, "nonce": nonce, "log_path": str(tmp_path / "cand.log")}
    proc = subprocess.run([sys.executable, "-m", "orchestrator.runner.judge"], input=json.dumps(job), text=True,
                          capture_output=True, cwd=REPO_ROOT, timeout=300)
    verdict = parse_verdict(proc.stdout, nonce)
    assert verdict is not None and verdict["failure_class"] is None, proc.stderr[-2000:]
    loaded = [t for t in verdict["stages"]["correctness"]["trials"] if t["kind"] == "loaded"]
    assert len(loaded) == 2 and all(t["passed"] for t in loaded)  # the default on a GPU
