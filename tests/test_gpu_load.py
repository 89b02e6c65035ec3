"""The judges' GPU load (runner/gpuload.py): it runs only while a loaded trial's call runs, and a
kernel whose result changes in that company fails correctness with the load named.

On a CPU the same thread loads the CPU, so what is checked here is when the load runs and the
judge's use of it; that the load brings out a real race on a GPU is the fa2-bwd reference's
(scripts/gpu/fa2_bwd_race.py, docs/verification.md)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.runner.gpuload import GpuLoad, LoadError
from orchestrator.runner.judge import parse_verdict

PROBLEM = REPO_ROOT / "problems" / "graph" / "l1" / "csr_spmv"
HONEST = REPO_ROOT / "tests" / "hacks" / "honest_torch.py"


def test_the_load_runs_only_between_run_and_pause() -> None:
    load = GpuLoad("cpu", mib=8)
    try:
        with load.running() as info:
            time.sleep(0.3)
        assert info["load_iterations"] > 0
        after = load.iterations
        time.sleep(0.3)
        assert load.iterations == after  # paused: not one more iteration
        with load.running() as again:
            pass
        assert again["load_iterations"] >= 1  # the body starts once the load has
        thread = load._thread
    finally:
        load.close()
    assert thread is not None and not thread.is_alive()
    try:  # a closed load starts again at its next run (a judge keeps one for all its trials)
        with load.running() as restarted:
            time.sleep(0.1)
        assert restarted["load_iterations"] > 0
        with load.running(on=False) as off:
            pass
        assert off == {}
    finally:
        load.close()


def test_a_load_that_fails_is_the_judges_error_in_one_line(monkeypatch) -> None:
    load = GpuLoad("cpu", mib=8)

    def broken() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(load, "_iteration", broken)  # what a CUDA failure in the load would do
    with pytest.raises(LoadError) as err:
        with load.running():
            time.sleep(0.05)
    assert str(err.value).startswith("the GPU load did not ") and "illegal memory access" in str(err.value)
    assert "\n" not in str(err.value)
    load.close()


WRONG_IN_COMPANY = '''

def _loaded() -> bool:
    # the judge (this process's parent) waits for this call; any CPU time it spends meanwhile is the load's
    import os
    import time

    def ticks() -> int:
        fields = open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    before = ticks()
    time.sleep(0.2)
    return ticks() - before >= 10  # half a core: the load keeps one busy, the waiting judge none


class ModelNew(ModelNew):
    def forward(self, *args):
        out = super().forward(*args)
        return out * 1.5 if _loaded() else out
'''


def _verdict(tmp_path: Path, solution: Path, mode: str = "check", stress: int = 1, **job_keys: Any) -> dict:
    """The core judge's verdict on a CPU; `job_keys` (loaded_trials, loaded_calls) go into its job."""
    nonce = "cd" * 32
    job = {"problem_dir": str(PROBLEM), "solution": str(solution), "device": "cpu", "mode": mode, "seed": 5,
           "stress": stress, "trials": 3, "nonce": nonce, "log_path": str(tmp_path / "cand.log"),
           "timing": {"iters_cpu": 1, "warmup": 0, "input_sets": 1}}
    job.update(job_keys)
    proc = subprocess.run([sys.executable, "-m", "orchestrator.runner.judge"], input=json.dumps(job), text=True,
                          capture_output=True, cwd=REPO_ROOT, timeout=300)
    verdict = parse_verdict(proc.stdout, nonce)
    assert verdict is not None, proc.stderr[-2000:]
    return verdict


def test_loaded_trials_run_with_the_load_and_none_by_default_on_a_cpu(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, HONEST, loaded_trials=2)
    assert verdict["failure_class"] is None, verdict["failure_detail"]
    loaded = [t for t in verdict["stages"]["correctness"]["trials"] if t["kind"] == "loaded"]
    assert len(loaded) == 2 and all(t["passed"] and "load_iterations" in t and t["calls"] == 4 for t in loaded)
    default = _verdict(tmp_path, HONEST)
    assert not any(t["kind"] == "loaded" for t in default["stages"]["correctness"]["trials"])


def test_a_result_that_changes_beside_the_load_is_incorrect_and_says_so(tmp_path: Path) -> None:
    solution = tmp_path / "wrong_in_company.py"
    solution.write_text(HONEST.read_text() + WRONG_IN_COMPANY)
    verdict = _verdict(tmp_path, solution, loaded_trials=2)
    assert verdict["failure_class"] == "incorrect", verdict["failure_detail"]
    assert verdict["failure_detail"].startswith("loaded trial at shape ")
    assert "the GPU loaded by other work" in verdict["failure_detail"]
    assert "call 1 of 4: " in verdict["failure_detail"]
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


WRONG_AT_SEVENTH_CALL = '''

_CALLS = []


class ModelNew(ModelNew):
    def forward(self, *args):
        _CALLS.append(1)
        out = super().forward(*args)
        return out * 1.5 if len(_CALLS) == 7 else out
'''


def test_a_loaded_trial_checks_each_of_its_back_to_back_calls(tmp_path: Path) -> None:
    """A race is a chance per call, so a loaded trial makes four calls back to back on one input set
    and checks every output. Wrong at its 7th call only (4 ordinary trials, then the third call of
    the first loaded trial), a submission fails, named by the call; with one call per loaded trial,
    as before, nothing ever checks a 7th call and it passes."""
    solution = tmp_path / "wrong_at_seventh_call.py"
    solution.write_text(HONEST.read_text() + WRONG_AT_SEVENTH_CALL)
    verdict = _verdict(tmp_path, solution, loaded_trials=2, stress=0)
    assert verdict["failure_class"] == "incorrect", verdict["failure_detail"]
    assert verdict["failure_detail"].startswith("loaded trial at shape ")
    assert "call 3 of 4: " in verdict["failure_detail"]
    assert _verdict(tmp_path, solution, loaded_trials=2, stress=0, loaded_calls=1)["failure_class"] is None


def test_loaded_trials_leave_a_seeds_stress_shapes_as_they_were(tmp_path: Path) -> None:
    """A rescore with the run's seed must draw the same hidden shapes whether or not (and however
    many) loaded trials run: their inputs come from a generator of their own."""
    shapes = []
    for loaded in (0, 2):
        verdict = _verdict(tmp_path, HONEST, loaded_trials=loaded, mode="full", stress=6)
        assert verdict["failure_class"] is None, verdict["failure_detail"]
        shapes.append([t["shape"] for t in verdict["stages"]["stress"]["trials"]])
    assert shapes[0] == shapes[1] and len(shapes[0]) == 6
