"""A real judge process and the host's GPU lock: its trials share the GPU with other
evaluations' trials, its timing has the GPU alone (the local executor relies on this to
overlap scorings on one GPU; orchestrator/executors/gpus.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.runner.judge import (LOADED_CALLS, gpu_lock, loaded_trial_count, parse_verdict, plain_trial_count,
                                       profiler_lock)
from orchestrator.scoring.counters import profiled_range

PROBLEM = REPO_ROOT / "problems" / "graph" / "l1" / "csr_spmv"
HONEST = REPO_ROOT / "tests" / "hacks" / "honest_torch.py"


def _start_judge(tmp_path: Path, name: str, lock: str | None, solution: Path = HONEST,
                 device: str = "cpu", problem: Path = PROBLEM,
                 mode: str = "full") -> tuple[subprocess.Popen, Path, Path, str]:
    nonce = "ab" * 32
    job = {"problem_dir": str(problem), "solution": str(solution), "device": device, "mode": mode, "seed": 3,
           "stress": 1, "trials": 3, "nonce": nonce, "log_path": str(tmp_path / f"{name}.log"), "gpu_lock": lock,
           "timing": {"iters_cpu": 1, "warmup": 0, "input_sets": 1}}
    stdout, stderr = tmp_path / f"{name}.stdout", tmp_path / f"{name}.stderr"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.runner.judge"], stdin=subprocess.PIPE,
                            stdout=stdout.open("w"), stderr=stderr.open("w"), text=True, cwd=REPO_ROOT)
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    return proc, stdout, stderr, nonce


def _wait_for_line(proc: subprocess.Popen, stderr: Path, text: str, limit_s: float = 240) -> None:
    deadline = time.monotonic() + limit_s
    while text not in stderr.read_text():
        assert proc.poll() is None, f"the judge ended before '{text}': {stderr.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"no '{text}' within {limit_s} s: {stderr.read_text()[-2000:]}"
        time.sleep(0.2)


def _verdict(proc: subprocess.Popen, stdout: Path, nonce: str) -> dict:
    proc.wait(timeout=240)
    verdict = parse_verdict(stdout.read_text(), nonce)
    assert verdict is not None, stdout.read_text()[-2000:]
    return verdict


def test_trials_run_beside_another_evaluations_trials_and_timing_waits_for_them(tmp_path):
    lock = str(tmp_path / "gpu0.lock")
    with gpu_lock(lock, shared=True):                       # another evaluation's trial, held throughout
        proc, stdout, stderr, nonce = _start_judge(tmp_path, "a", lock)
        _wait_for_line(proc, stderr, "] stage timing")      # loaded, correctness and stress ran meanwhile
        # and the timing's set-up (the candidate built, the input sets, the reference's fingerprints)
        _wait_for_line(proc, stderr, "] timing, the GPU alone")
        time.sleep(1.5)
        assert proc.poll() is None, "the judge timed while another evaluation's trial held the GPU"
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    assert verdict["stages"]["timing"]["status"] == "passed"
    assert len(verdict["stages"]["stress"]["trials"]) == 1
    stages = verdict["stages"]
    assert stages["timing"]["lock_wait_s"] >= 1.4               # the wait for the trial is the timing's
    assert stages["timing"]["lock_wait_s"] <= stages["timing"]["stage_wall_s"]
    # the set-up's own seconds, its waits not in them: the rest of the stage held the GPU alone
    assert 0 < stages["timing"]["setup_s"] <= stages["timing"]["stage_wall_s"] - stages["timing"]["lock_wait_s"]
    assert stages["load"]["lock_wait_s"] < 1 and stages["stress"]["lock_wait_s"] < 1  # shared beside a trial


def test_nothing_of_a_judge_runs_while_another_evaluation_times(tmp_path):
    lock = str(tmp_path / "gpu0.lock")
    with gpu_lock(lock):                                     # another evaluation's timing
        proc, stdout, stderr, nonce = _start_judge(tmp_path, "b", lock)
        _wait_for_line(proc, stderr, "] load")
        time.sleep(2.0)
        assert "stage correctness" not in stderr.read_text() and proc.poll() is None
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    assert verdict["stages"]["load"]["wall_s"] >= 1.5       # its load waited for the timing
    assert 1.5 <= verdict["stages"]["load"]["lock_wait_s"] <= verdict["stages"]["load"]["wall_s"]
    assert verdict["stages"]["timing"]["lock_wait_s"] < 1


def _start_profile_target(tmp_path: Path, lock: str, profiler: bool = False) -> tuple[subprocess.Popen, Path]:
    job = {"problem_dir": str(PROBLEM), "solution": str(HONEST), "iters": 1, "gpu_lock": lock, "device": "cpu",
           "profiler_lock": profiler}
    stderr = tmp_path / "profile_target.stderr"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.runner.profile_target"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=stderr.open("w"), text=True, cwd=REPO_ROOT)
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    return proc, stderr


def test_the_counters_process_warms_up_beside_trials_and_is_profiled_alone(tmp_path):
    """ncu's target (scoring's counters) holds the lock files like a judge: shared while it
    builds and warms up, so another evaluation's trial does not stop it; alone while profiled."""
    lock = str(tmp_path / "gpu0.lock")
    with gpu_lock(lock, shared=True):                       # another evaluation's trial
        proc, stderr = _start_profile_target(tmp_path, lock)
        _wait_for_line(proc, stderr, "] warm-up")
        time.sleep(1.5)
        assert "] profiled" not in stderr.read_text(), "profiled while another evaluation's trial held the GPU"
    assert proc.wait(timeout=120) == 0, stderr.read_text()[-2000:]
    assert "] profiled" in stderr.read_text()


def test_the_counters_process_waits_while_another_evaluation_times(tmp_path):
    lock = str(tmp_path / "gpu0.lock")
    with gpu_lock(lock):                                    # another evaluation's timing
        proc, stderr = _start_profile_target(tmp_path, lock)
        time.sleep(4)
        assert proc.poll() is None and "] warm-up" not in stderr.read_text(), stderr.read_text()[-2000:]
    assert proc.wait(timeout=120) == 0, stderr.read_text()[-2000:]


def test_the_counters_process_given_the_profiler_lock_queues_only_its_profiled_range(tmp_path):
    """counters_overlap: ncu sessions start together; the profiled process takes the host's
    profiler lock itself, after warming up, so another session's profiled range delays only its own."""
    lock = str(tmp_path / "gpu0.lock")
    with profiler_lock():                                   # another ncu session's profiled range
        proc, stderr = _start_profile_target(tmp_path, lock, profiler=True)
        _wait_for_line(proc, stderr, "] warm-up")           # its start-up did not wait
        time.sleep(3)
        assert proc.poll() is None and "] profiled" not in stderr.read_text(), stderr.read_text()[-2000:]
    assert proc.wait(timeout=120) == 0, stderr.read_text()[-2000:]
    assert "] profiled" in stderr.read_text()
    held = profiled_range(stderr.read_text())              # what scoring's counters record of it
    assert held["profiled_lock_wait_s"] >= 2.5 and 0 < held["profiled_s"] < held["profiled_lock_wait_s"]


NEEDS_45_PERCENT = ("        need = torch.empty(int(0.45 * torch.cuda.get_device_properties(x.device).total_memory),"
                    " dtype=torch.uint8, device=x.device)\n")


def _problem_whose_reference_first_runs(tmp_path: Path, lines: str, appended: str = "") -> Path:
    """A copy of csr_spmv whose reference's forward starts with `lines` (and `appended` at the end of the file)."""
    problem = tmp_path / "csr_spmv"
    shutil.copytree(PROBLEM, problem)
    reference = problem / "reference.py"
    head = "    def forward(self, rowptr, col, val, x):\n"
    reference.write_text(reference.read_text().replace(head, head + lines, 1) + appended)
    return problem


def _oom_once(tmp_path: Path, times: int) -> Path:
    """The honest submission, except that its first `times` calls run out of GPU memory."""
    flag = tmp_path / "calls"
    source = HONEST.read_text() + f'''

_FLAG = {str(flag)!r}


class ModelNew(ModelNew):
    def forward(self, *args):
        import os
        calls = len(open(_FLAG).read()) if os.path.exists(_FLAG) else 0
        open(_FLAG, "a").write("x")
        if calls < {times}:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB (a stand-in)")
        return super().forward(*args)
'''
    path = tmp_path / f"oom_{times}.py"
    path.write_text(source)
    return path


def test_a_trial_out_of_memory_beside_others_runs_again_alone_and_is_marked(tmp_path):
    lock = str(tmp_path / "gpu0.lock")
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "c", lock, solution=_oom_once(tmp_path, 1))
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    first = verdict["stages"]["correctness"]["trials"][0]
    assert first["passed"] and "out of GPU memory" in first["retried_alone"]
    assert not any("retried_alone" in t for t in verdict["stages"]["correctness"]["trials"][1:])


def test_a_submission_out_of_memory_alone_too_fails(tmp_path):
    lock = str(tmp_path / "gpu0.lock")
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "d", lock, solution=_oom_once(tmp_path, 2))
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] == "runtime_error" and "out of memory" in verdict["failure_detail"]


def test_without_a_lock_out_of_memory_is_not_retried(tmp_path):
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "e", None, solution=_oom_once(tmp_path, 1))
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] == "runtime_error"


def test_a_forged_reply_beside_others_is_a_hack_not_the_judges_failure(tmp_path):
    """With a lock, every trial ends by asking the candidate to release its cached memory; after a
    forged reply the candidate is killed, and that request must not turn the verdict into the
    judge's own failure (infra_error, as on the GPU in the eighteenth session)."""
    lock = str(tmp_path / "gpu0.lock")
    forged = REPO_ROOT / "tests" / "hacks" / "forged_message.py"
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "f", lock, solution=forged)
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] == "hack_detected", verdict["failure_detail"][-1500:]
    assert "forged_message" in verdict["failure_detail"]


def test_a_candidate_that_dies_beside_others_is_its_runtime_error(tmp_path):
    lock = str(tmp_path / "gpu0.lock")
    dies = tmp_path / "dies.py"
    dies.write_text("import os\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, rowptr, col, val, x):\n        os._exit(7)\n")
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "g", lock, solution=dies)
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] == "runtime_error", verdict["failure_detail"][-1500:]
    assert "exit code 7" in verdict["failure_detail"]


@pytest.mark.parametrize("with_lock", [True, False], ids=["lock", "no_lock"])
def test_the_timed_process_makes_its_first_call_with_the_gpu_alone(tmp_path, with_lock):
    """What a submission works out at its first call (triton.autotune times its configs there)
    must not come from a moment shared with other evaluations' trials. Beside them (a lock), the
    timing gets a fresh candidate process whose first call runs with the GPU alone; a judge alone
    on its GPU keeps its one process. The submission notes, at each process's first call, whether
    another process held the lock file exclusively then."""
    lock = str(tmp_path / "gpu0.lock")
    first_calls = tmp_path / "first_calls"
    solution = tmp_path / "notes_its_first_call.py"
    solution.write_text(HONEST.read_text() + f'''

_CALLED = []


class ModelNew(ModelNew):
    def forward(self, *args):
        if not _CALLED:
            import fcntl, os
            _CALLED.append(True)
            with open({lock!r}, "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    company = "shared"
                except BlockingIOError:
                    company = "alone"
            open({str(first_calls)!r}, "a").write(f"{{os.getpid()}} {{company}}\\n")
        return super().forward(*args)
''')
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "f", lock if with_lock else None, solution=solution)
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    assert verdict["stages"]["timing"]["status"] == "passed"
    calls = [line.split() for line in first_calls.read_text().splitlines()]
    if with_lock:
        assert [company for _, company in calls] == ["shared", "alone"], calls
        assert calls[0][0] != calls[1][0]
    else:
        assert [company for _, company in calls] == ["shared"], calls


def _calls_before_timing(device: str) -> int:
    """The candidate's calls in correctness and stress for _start_judge's job: one per plain trial,
    the loaded trials' calls (none on a CPU), one stress shape."""
    return plain_trial_count({}) + loaded_trial_count({}, device) * LOADED_CALLS + 1


def _spawned_children(pid: int) -> set[int]:
    """The judge's child processes started by multiprocessing's spawn (its candidate processes)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:  # a thread or a child may end while we read
            children = (task / "children").read_text().split()
            found.update(int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes())
        except OSError:
            pass
    return found


def test_the_fresh_timed_process_starts_while_another_evaluation_holds_the_gpu(tmp_path):
    """A process start launches nothing on the GPU, so the timing's fresh candidate process starts
    before the judge takes its hold: while another evaluation times (holds the lock exclusively),
    the new process appears. The submission waits at its stress call until the other evaluation
    is queued for the lock, so that evaluation's hold comes between stress and the set-up."""
    lock = str(tmp_path / "gpu0.lock")
    at_stress, go = tmp_path / "at_stress", tmp_path / "go"
    stress_call = _calls_before_timing("cpu")  # the last call before the timing, counted from 1
    solution = tmp_path / "waits_at_stress.py"
    solution.write_text(HONEST.read_text() + f'''

_CALLS = []


class ModelNew(ModelNew):
    def forward(self, *args):
        import os, time
        _CALLS.append(True)
        if len(_CALLS) == {stress_call}:
            open({str(at_stress)!r}, "w").write("x")
            while not os.path.exists({str(go)!r}):
                time.sleep(0.05)
        return super().forward(*args)
''')
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "s", lock, solution=solution)
    deadline = time.monotonic() + 240
    while not at_stress.exists():
        assert proc.poll() is None and time.monotonic() < deadline, stderr.read_text()[-2000:]
        time.sleep(0.1)
    first = _spawned_children(proc.pid)
    held, release = threading.Event(), threading.Event()

    def another_evaluations_timing() -> None:
        with gpu_lock(lock, shared=False):
            held.set()
            release.wait()

    other = threading.Thread(target=another_evaluations_timing)
    other.start()
    try:
        time.sleep(1)  # queued for the lock behind the stress trial
        go.write_text("x")
        assert held.wait(60), "the other evaluation never got the GPU"
        held_until = time.monotonic() + 60
        while not _spawned_children(proc.pid) - first:
            assert time.monotonic() < held_until, "no fresh candidate process while another evaluation timed"
            time.sleep(0.1)
        assert "] timing, the GPU alone" not in stderr.read_text()
    finally:
        release.set()
        other.join()
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    assert verdict["stages"]["stress"]["status"] == "passed" and verdict["stages"]["timing"]["status"] == "passed"


_OUT_OF_MEMORY_WHILE_THE_CANDIDATE_LIVES = '''

import os as _os


def _out_of_memory_while_the_candidate_lives():
    try:
        _os.kill(int(open(_os.environ["HOG_PID_FILE"]).read()), 0)
    except (KeyError, OSError, ValueError):
        return
    raise torch.OutOfMemoryError("CUDA out of memory (the candidate's process holds the GPU)")
'''


def _reference_pushed_out_by_the_candidate(tmp_path: Path) -> tuple[Path, Path]:
    """csr_spmv whose reference runs out of memory while the candidate's process lives (on a CPU
    machine, what a submission that holds the GPU's memory does to the reference), and the honest
    submission, which writes its process id where the reference looks."""
    problem = _problem_whose_reference_first_runs(tmp_path, "        _out_of_memory_while_the_candidate_lives()\n",
                                                  _OUT_OF_MEMORY_WHILE_THE_CANDIDATE_LIVES)
    solution = tmp_path / "holds_the_gpu.py"
    solution.write_text(HONEST.read_text() + '\nimport os\nopen(os.environ["HOG_PID_FILE"], "w").write(str(os.getpid()))\n')
    return problem, solution


@pytest.mark.parametrize("with_lock", [True, False], ids=["lock", "no_lock"])
def test_a_reference_out_of_memory_beside_the_candidate_runs_with_it_stopped(tmp_path, monkeypatch, with_lock):
    """Not an infra error (the report would drop the episode): the candidate's process is stopped,
    the reference computed, the candidate restarted; on a CPU nothing measures its memory, so it
    is not blamed."""
    problem, solution = _reference_pushed_out_by_the_candidate(tmp_path)
    monkeypatch.setenv("HOG_PID_FILE", str(tmp_path / "candidate.pid"))
    lock = str(tmp_path / "gpu0.lock") if with_lock else None
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "h", lock, solution=solution, problem=problem, mode="check")
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict["failure_detail"][-1500:]
    trials = verdict["stages"]["correctness"]["trials"]
    assert len(trials) >= 4 and all(t["passed"] for t in trials)
    assert all("it ran with that process stopped" in t["candidate_restarted"] for t in trials)
    assert all(("retried_alone" in t) == with_lock for t in trials)


@pytest.mark.gpu
def test_a_submission_holding_most_of_the_gpu_fails_when_the_reference_runs_out(tmp_path):
    """On a GPU: the submission holds 60 % of the GPU from its import on, the reference needs 45 %:
    the reference runs out of memory, stopping the candidate frees more than half the GPU, and the
    submission fails with runtime_error (not infra_error, which no rate counts)."""
    import torch

    problem = _problem_whose_reference_first_runs(tmp_path, NEEDS_45_PERCENT)
    total = torch.cuda.get_device_properties(0).total_memory
    solution = tmp_path / "hog.py"
    solution.write_text(HONEST.read_text() + f"\nimport torch\n_HOG = torch.empty({int(0.6 * total)}, dtype=torch.uint8, device='cuda')\n")
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "i", None, solution=solution, problem=problem,
                                               device="cuda", mode="check")
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] == "runtime_error", verdict["failure_detail"][-1500:]
    assert "out_of_memory: the reference ran out of GPU memory while the submission's process held" in verdict["failure_detail"]


@pytest.mark.gpu
def test_a_real_cuda_out_of_memory_beside_others_is_retried_alone(tmp_path):
    """On a GPU: the first call asks for twice the GPU's memory (a real torch.OutOfMemoryError in
    the candidate process); the judge runs that trial again alone, and the rest passes."""
    import torch

    flag = tmp_path / "calls"
    solution = tmp_path / "oom_real.py"
    solution.write_text(HONEST.read_text() + f'''

class ModelNew(ModelNew):
    def forward(self, *args):
        import os
        if not os.path.exists({str(flag)!r}):
            open({str(flag)!r}, "w").write("x")
            torch.empty(2 * torch.cuda.get_device_properties(0).total_memory, dtype=torch.uint8, device="cuda")
        return super().forward(*args)
''')
    assert torch.cuda.is_available()
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "g", str(tmp_path / "gpu.lock"), solution=solution,
                                               device="cuda")
    verdict = _verdict(proc, stdout, nonce)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    assert "retried_alone" in verdict["stages"]["correctness"]["trials"][0]


@pytest.mark.gpu
def test_a_submission_that_takes_the_gpu_during_timing_fails_when_the_reference_runs_out(tmp_path):
    """On a GPU: the submission holds nothing through correctness and stress (_calls_before_timing),
    then takes 55 % of the GPU at its first timed call; the reference, timed beside it and needing
    45 %, runs out of memory. Stopping the candidate frees more than half the GPU: runtime_error,
    not the infra_error that no rate counts. The reference hands its 45 % back to the driver after
    each call: kept in the judge's cache (the twentieth session's H100), it made the candidate's
    own allocation fail instead, a runtime_error of another path."""
    import torch

    problem = _problem_whose_reference_first_runs(tmp_path, NEEDS_45_PERCENT + "        del need\n"
                                                  "        torch.cuda.empty_cache()\n")
    flag = tmp_path / "calls"
    calls_before_timing = _calls_before_timing("cuda")  # a hand count (7) went stale when loaded trials grew
    solution = tmp_path / "hog_in_timing.py"
    solution.write_text(HONEST.read_text() + f'''

_HOG = []


class ModelNew(ModelNew):
    def forward(self, *args):
        import os
        calls = len(open({str(flag)!r}).read()) if os.path.exists({str(flag)!r}) else 0
        open({str(flag)!r}, "a").write("x")
        if calls >= {calls_before_timing} and not _HOG:
            _HOG.append(torch.empty(int(0.55 * torch.cuda.get_device_properties(0).total_memory), dtype=torch.uint8,
                                    device="cuda"))
        return super().forward(*args)
''')
    assert torch.cuda.is_available()
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "j", None, solution=solution, problem=problem,
                                               device="cuda", mode="full")
    verdict = _verdict(proc, stdout, nonce)
    for stage in ("correctness", "stress"):
        assert verdict["stages"][stage]["status"] == "passed", verdict["failure_detail"][-1500:]
    assert verdict["failure_class"] == "runtime_error", verdict["failure_detail"][-1500:]
    assert "out_of_memory: the reference ran out of GPU memory while the submission's process held" in verdict["failure_detail"]


def _reference_out_of_memory_at_call(tmp_path: Path, n: int) -> Path:
    """csr_spmv whose reference runs out of memory at its n-th call only (counted in a file)."""
    counter = tmp_path / "reference_calls"
    return _problem_whose_reference_first_runs(tmp_path, (
        f"        calls = len(open({str(counter)!r}).read()) if __import__('os').path.exists({str(counter)!r}) else 0\n"
        f"        open({str(counter)!r}, 'a').write('x')\n"
        f"        if calls + 1 == {n}:\n"
        "            raise torch.OutOfMemoryError('CUDA out of memory (a stand-in: other evaluations hold the GPU)')\n"))


@pytest.mark.parametrize("with_lock", [True, False], ids=["lock", "no_lock"])
def test_the_timing_set_up_out_of_memory_beside_others_runs_again_alone(tmp_path, with_lock):
    """Four correctness trials and one stress shape call the reference five times; its sixth call,
    the timing set-up's fingerprint, runs out of memory. Beside other evaluations (a lock) the
    set-up runs again with the GPU alone and the timing completes; without a lock nothing else
    could have held the memory: the judge's own error, as before."""
    problem = _reference_out_of_memory_at_call(tmp_path, 6)
    lock = str(tmp_path / "gpu0.lock") if with_lock else None
    proc, stdout, stderr, nonce = _start_judge(tmp_path, "k", lock, problem=problem)
    proc.wait(timeout=240)
    verdict = parse_verdict(stdout.read_text(), nonce)
    if with_lock:
        assert verdict is not None and verdict["failure_class"] is None, stderr.read_text()[-1500:]
        assert verdict["stages"]["timing"]["status"] == "passed"
        assert len((tmp_path / "reference_calls").read_text()) > 6
    else:
        assert verdict is not None and verdict["failure_class"] == "infra_error"
        assert "OutOfMemoryError" in verdict["failure_detail"]
