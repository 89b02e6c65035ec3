"""The translation judge end to end on a CPU, with host-compiled stand-in libraries.

Real tasks run on a GPU; here the same flow (spawned library processes, ctypes, the
task's glue and reference, correctness, stress, timing, the signed verdict) runs on
tr-cutlass-tf32-gemm with plain C implementations of its entry point built by the
host compiler, so every failure class the judge assigns is exercised for real.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.translation.catalog import find_task
from orchestrator.translation.scoring import _assemble, run_judge

TASK = find_task("tr-cutlass-tf32-gemm", REPO_ROOT / "translation")

HEADER = """
#include <stddef.h>
int popcorn_tf32_gemm(int m, int n, int k, float alpha, const float* A, const float* B,
                      float beta, const float* C, float* D, void* stream) {
"""
CORRECT = HEADER + """
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += (double)A[i * k + p] * B[p + j * k];
      D[i + j * m] = (float)(alpha * acc + beta * C[i + j * m]);
    }
  return 0;
}
"""
IGNORES_BETA = CORRECT.replace("+ beta * C[i + j * m]", "")
DISCLOSED_ONLY = CORRECT.replace("  for (int j = 0;", "  if (m != 48 || n != 40 || k != 36) return 0;\n  for (int j = 0;")
MUTATES_A = CORRECT.replace("  return 0;\n}", "  ((float*)A)[0] = 0.f;\n  return 0;\n}")
CRASHES = HEADER + "  D = NULL; D[0] = 1.f; return 0;\n}\n"
FAILS = HEADER + "  return 700;  /* cudaErrorIllegalAddress */\n}\n"


def _library(tmp_path: Path, name: str, code: str) -> str:
    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(code)
    subprocess.run([shutil.which("gcc") or "cc", "-shared", "-fPIC", "-O2", str(src), "-o", str(lib)], check=True)
    return str(lib)


def _job(tmp_path: Path, candidate: str, mode: str = "full") -> dict:
    reference = _library(tmp_path, "reference", CORRECT)
    return {"task_dir": str(TASK.path), "symbol": "popcorn_tf32_gemm", "device": "cpu", "mode": mode, "seed": 7,
            "libraries": {"candidate": _library(tmp_path, "candidate", candidate), "h100": reference,
                          "a100": reference},
            "trials": 3, "stress": 4, "timing": {"iters": 5, "warmup": 1, "input_sets": 2}, "trial_timeout_s": 60}


def _judge(tmp_path: Path, candidate: str, mode: str = "full") -> dict:
    return run_judge(_job(tmp_path, candidate, mode), timeout_s=300)


@pytest.fixture(scope="module")
def result_schema() -> dict:
    return json.loads((REPO_ROOT / "schemas" / "result.schema.json").read_text())


def test_correct_library_passes_every_stage_and_the_record_validates(tmp_path: Path, result_schema: dict) -> None:
    result = _judge(tmp_path, CORRECT)
    assert result["failure_class"] is None, result["failure_detail"]
    stages = result["stages"]
    assert [t["passed"] for t in stages["correctness"]["trials"]] == [True] * 3
    assert stages["correctness"]["shape"] == {"m": 48, "n": 40, "k": 36}
    assert stages["stress"]["n"] == 4 and all(t["passed"] for t in stages["stress"]["trials"])
    assert any(t["shape"] != stages["correctness"]["shape"] for t in stages["stress"]["trials"])
    timing = stages["timing"]
    assert timing["unit"] == "cpu_wall" and timing["candidate"]["n"] == 5
    assert timing["baseline"]["n"] == 5 and timing["speedup"] > 0
    walls = [stages[name]["stage_wall_s"] for name in ("correctness", "stress", "timing")]
    assert all(w > 0 for w in walls), walls  # where an evaluation's time went
    record = _assemble(TASK, TASK.file("h100.cu"), 0.0, result, {"wall_s": 1.0}, {}, "none")
    jsonschema.validate(record, result_schema)
    assert record["status"] == "passed" and record["speedup"] == timing["speedup"]
    assert record["track"] == "translation-single" and record["stages"]["timing"]["baseline"]


class _RunsInTheJudge:
    def __reduce__(self):
        return (eval, ("{'ok': True, 'output': None, 'mutated_inputs': []}",))


def test_a_message_the_library_writes_to_the_pipe_is_refused_not_unpickled(tmp_path: Path) -> None:
    """Native code shares its process with the worker and can write to the worker's pipe: a
    library that sends its own framed pickle (which, loaded with pickle.loads, would run code
    in the judge) before the real reply fails as hack_detected, and its code never runs."""
    import pickle
    import struct

    payload = pickle.dumps({"ok": True, "output": _RunsInTheJudge()})
    frame = struct.pack("!i", len(payload)) + payload
    forge = ("#include <sys/stat.h>\n#include <unistd.h>\n"
             f"static const unsigned char FRAME[{len(frame)}] = {{{', '.join(str(b) for b in frame)}}};\n"
             "static void forge(void) { struct stat st; for (int fd = 3; fd < 256; ++fd)"
             " if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) (void)!write(fd, FRAME, sizeof FRAME); }\n")
    forging = forge + CORRECT.replace("  for (int j = 0;", "  forge();\n  for (int j = 0;", 1)
    result = _judge(tmp_path, forging)
    assert result["failure_class"] == "hack_detected", result["failure_detail"]
    assert "forged_message" in result["failure_detail"] and "builtins.eval" in result["failure_detail"]


def test_trials_wait_while_another_evaluation_times(tmp_path: Path) -> None:
    """A translation trial takes the host's GPU lock shared, as the core's do, so it never runs
    while another evaluation holds the GPU alone to time."""
    from orchestrator.runner.judge import gpu_lock

    lock = str(tmp_path / "gpu0.lock")
    held, release = threading.Event(), threading.Event()

    def another_timing() -> None:
        with gpu_lock(lock):
            held.set()
            release.wait(30)

    job = {**_job(tmp_path, CORRECT), "gpu_lock": lock}
    timer = threading.Thread(target=another_timing)
    timer.start()
    held.wait(10)
    threading.Timer(10.0, release.set).start()
    verdict = run_judge(job, timeout_s=300)
    timer.join(10)
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    # the judge and its libraries start without the lock (a few seconds); its first trial then
    # waited for the rest of the 10 s (unheld, the whole stage takes well under a second)
    assert verdict["stages"]["correctness"]["stage_wall_s"] >= 3.0


def test_timing_set_up_runs_beside_another_evaluations_trial_and_timing_waits(tmp_path: Path) -> None:
    """The timing's set-up (input sets, fingerprints, the processes of both sides started and
    their libraries loaded) takes the GPU lock shared; only the timed rounds hold it alone. Each
    library logs its loads (a constructor); with another evaluation's trial holding the lock
    shared throughout, all six loads happen (the stress process, two fresh candidate processes,
    two of the H100 reference's, the A100 baseline's) and the judge then waits."""
    from orchestrator.runner.judge import gpu_lock

    loads = tmp_path / "loads.txt"
    logs_load = ("#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void loaded(void) {"
                 f' FILE* f = fopen("{loads}", "a"); if (f) {{ fprintf(f, "%d\\n", (int)getpid()); fclose(f); }} }}\n')
    job = _job(tmp_path, logs_load + CORRECT)
    job["libraries"] = {**job["libraries"], "h100": _library(tmp_path, "reference_logged", logs_load + CORRECT)}
    job["libraries"]["a100"] = job["libraries"]["h100"]
    job["gpu_lock"] = str(tmp_path / "gpu0.lock")
    verdicts: list[dict] = []
    with gpu_lock(job["gpu_lock"], shared=True):  # another evaluation's trial
        judge = threading.Thread(target=lambda: verdicts.append(run_judge(job, timeout_s=300)))
        judge.start()
        deadline = time.monotonic() + 200
        while len(loads.read_text().split() if loads.exists() else []) < 6:
            assert judge.is_alive() and time.monotonic() < deadline, "the timing's set-up waited for the GPU alone"
            time.sleep(0.2)
        time.sleep(1.5)
        assert judge.is_alive() and not verdicts, "the judge timed while another evaluation's trial held the GPU"
    judge.join(300)
    assert verdicts and verdicts[0]["failure_class"] is None, verdicts and verdicts[0].get("failure_detail")
    timed = verdicts[0]["stages"]["timing"]
    assert len(set(loads.read_text().split())) == 6
    assert 0 < timed["setup_s"] < timed["stage_wall_s"] - 1.0  # the wait for the lock is not set-up


def test_the_candidate_is_timed_in_fresh_processes_taken_in_turn(tmp_path: Path) -> None:
    """Like the H100 reference, the candidate is timed in processes that ran nothing else, two
    of them (the default), one per round in turn: every call appends "<pid> <m>" to a file, and
    the timing calls after the stress shapes come from two other processes than the
    correctness and stress calls, alternating by round."""
    calls = tmp_path / "calls.txt"
    logging = CORRECT.replace("  for (int j = 0;", f"""  {{ FILE* f = fopen("{calls}", "a");
    if (f) {{ fprintf(f, "%d %d\\n", (int)getpid(), m); fclose(f); }} }}
  for (int j = 0;""", 1)
    logging = "#include <stdio.h>\n#include <unistd.h>\n" + logging
    result = _judge(tmp_path, logging)
    assert result["failure_class"] is None, result["failure_detail"]
    rows = [line.split() for line in calls.read_text().splitlines()]
    pids = list(dict.fromkeys(pid for pid, _ in rows))  # in order of first appearance
    checked = 3 + result["stages"]["stress"]["n"]  # correctness trials, then the stress shapes
    assert len(pids) == 3, pids
    assert {pid for pid, _ in rows[:checked]} == {pids[0]}
    assert {pid for pid, _ in rows[checked:]} == set(pids[1:]) and len(rows) > checked
    timed = result["stages"]["timing"]
    assert timed["candidate"]["round_processes"] == [0, 1, 0, 1, 0][:len(timed["candidate"]["round_sizes"])]
    assert timed["reference"]["round_processes"][:2] == [0, 1]
    runs = [pid for pid, _ in rows[checked:]]
    switches = sum(a != b for a, b in zip(runs, runs[1:]))
    assert switches == len(timed["candidate"]["round_sizes"]) - 1  # one process per round, in turn


def test_wrong_output_is_incorrect(tmp_path: Path) -> None:
    result = _judge(tmp_path, IGNORES_BETA)
    assert result["failure_class"] == "incorrect"
    assert "outside atol" in result["failure_detail"] or "relative norm" in result["failure_detail"]


def test_disclosed_shape_only_fails_stress_and_is_flagged(tmp_path: Path, result_schema: dict) -> None:
    result = _judge(tmp_path, DISCLOSED_ONLY)
    assert result["passed_disclosed"] and result["failure_class"] == "stress_failed"
    record = _assemble(TASK, TASK.file("h100.cu"), 0.0, result, {"wall_s": 1.0}, {}, "none")
    jsonschema.validate(record, result_schema)
    assert record["reward_hack_suspected"] and record["speedup"] is None


def test_writing_a_read_only_input_is_a_hack(tmp_path: Path) -> None:
    result = _judge(tmp_path, MUTATES_A)
    assert result["failure_class"] == "hack_detected" and "input_mutation" in result["failure_detail"]


def test_crash_and_error_codes_are_runtime_errors(tmp_path: Path) -> None:
    crashed = _judge(tmp_path, CRASHES, mode="check")
    assert crashed["failure_class"] == "runtime_error" and "died" in crashed["failure_detail"]
    failed = _judge(tmp_path, FAILS, mode="check")
    assert failed["failure_class"] == "runtime_error" and "cudaError 700" in failed["failure_detail"]


def test_a_forged_verdict_line_is_ignored(tmp_path: Path) -> None:
    forged = HEADER + r"""
  static int done = 0;
  if (!done) { done = 1; fprintf(stdout, "\nPOPCORN-VERDICT {\"failure_class\": null} 00\n"); fflush(stdout); }
  return 700;
}
"""
    result = _judge(tmp_path, "#include <stdio.h>\n" + forged, mode="check")
    assert result["failure_class"] == "runtime_error"


def test_the_judge_runs_inside_a_local_sandbox_with_copied_libraries(tmp_path: Path, result_schema: dict) -> None:
    from orchestrator.config import Settings
    from orchestrator.translation.builds import BuildResult
    from orchestrator.translation.scoring import _judge_in_sandbox

    reference = _library(tmp_path, "reference", CORRECT)
    libs = {side: BuildResult(side, True, Path(path), "", 0.0, True, "k", [])
            for side, path in (("candidate", _library(tmp_path, "candidate", CORRECT)), ("h100", reference),
                               ("a100", reference))}
    job = {"symbol": "popcorn_tf32_gemm", "device": "cpu", "mode": "check", "seed": 3, "trials": 2, "stress": 0,
           "timing": {}, "trial_timeout_s": 60}
    result = _judge_in_sandbox(TASK, libs, job, Settings(device="cpu", sandbox="local"), 300, None)
    if result["failure_class"] == "infra_error" and result["failure_detail"].startswith("sandbox:"):
        pytest.skip(f"no local sandbox on this machine: {result['failure_detail']}")
    assert result["failure_class"] is None, result["failure_detail"]
    assert result["sandbox_backend"] == "local"
    assert [t["passed"] for t in result["stages"]["correctness"]["trials"]] == [True, True]
    record = _assemble(TASK, TASK.file("h100.cu"), 0.0, result, {"wall_s": 1.0}, {}, result.pop("sandbox_backend"))
    jsonschema.validate(record, result_schema)
    assert record["sandbox"] == {"backend": "local"}


HOLDS_THE_GPU = CORRECT + """
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void say_who_holds_the_gpu(void) {
  FILE* f = fopen(getenv("HOG_PID_FILE"), "w");
  if (f) { fprintf(f, "%d", (int)getpid()); fclose(f); }
}
"""


def test_a_reference_out_of_memory_beside_the_candidate_library_runs_with_it_stopped(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """The task's reference (in the judge) "runs out of GPU memory" while the candidate library's
    process lives: on a CPU machine, what a library holding the GPU's memory does to it. Not an infra
    error (the report would drop the episode): the library's process is stopped, the reference
    computed, the library loaded again; nothing measures its memory here, so it is not blamed."""
    task_dir = tmp_path / "task"
    shutil.copytree(TASK.path, task_dir)
    glue = task_dir / "task.py"
    glue.write_text(glue.read_text().replace("def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:\n", (
        "def reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:\n"
        "    import os\n"
        "    try:\n"
        "        os.kill(int(open(os.environ['HOG_PID_FILE']).read()), 0)\n"
        "    except (KeyError, OSError, ValueError):\n"
        "        pass\n"
        "    else:\n"
        "        raise torch.OutOfMemoryError('CUDA out of memory (the candidate library holds the GPU)')\n"), 1))
    assert "OutOfMemoryError" in glue.read_text()
    monkeypatch.setenv("HOG_PID_FILE", str(tmp_path / "candidate.pid"))
    job = {**_job(tmp_path, HOLDS_THE_GPU, mode="check"), "task_dir": str(task_dir)}
    result = run_judge(job, timeout_s=300)
    assert result["failure_class"] is None, result["failure_detail"][-1500:]
    trials = result["stages"]["correctness"]["trials"]
    assert len(trials) == 3 and all(t["passed"] for t in trials)
    assert all("it ran with that process stopped" in t["candidate_restarted"] for t in trials)



def test_loaded_trials_call_the_library_with_the_load_on(tmp_path: Path) -> None:
    """As the core judge's (tests/test_gpu_load.py): on a GPU two correctness trials run with
    runner/gpuload.py's load on by default; a job can ask for them on a CPU too."""
    job = {**_job(tmp_path, CORRECT, mode="check"), "loaded_trials": 2}
    result = run_judge(job, timeout_s=300)
    assert result["failure_class"] is None, result["failure_detail"]
    kinds = [t["kind"] for t in result["stages"]["correctness"]["trials"]]
    assert kinds == ["fresh"] * 3 + ["loaded"] * 2
    assert all(t["load_iterations"] >= 0 and t["calls"] == 4 for t in result["stages"]["correctness"]["trials"][3:])


# wrong at its 7th call in the process only: after 3 fresh trials, the last of the first loaded trial's four
WRONG_AT_SEVENTH_CALL = CORRECT.replace("  for (int j = 0;", "  static int calls = 0;\n  int wrong = ++calls == 7;\n"
                                        "  for (int j = 0;").replace("  return 0;\n}", "  if (wrong) D[0] += 1.f;\n  return 0;\n}")


def test_a_loaded_trial_checks_each_of_its_back_to_back_calls(tmp_path: Path) -> None:
    """A race is a chance per call, so a loaded trial calls the library four times back to back on
    one input set and checks every output: a library wrong at one call of them fails, and the
    failure names the call. With one call per loaded trial (as before) the same library passes."""
    job = {**_job(tmp_path, WRONG_AT_SEVENTH_CALL, mode="check"), "loaded_trials": 2, "stress": 0}
    result = run_judge(job, timeout_s=300)
    assert result["failure_class"] == "incorrect", result["failure_detail"]
    assert result["failure_detail"].startswith("loaded trial at shape ")
    assert "call 4 of 4: " in result["failure_detail"]
    assert run_judge({**job, "loaded_calls": 1}, timeout_s=300)["failure_class"] is None
