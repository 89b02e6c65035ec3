"""scripts/gpu/pass_summary.py: a (resumed) pass's wall time and where its episodes' time went,
with the waits for the GPU lock told apart from the work (its GPU runs are in docs/verification.md)."""
import json
import subprocess
import sys

from orchestrator.config import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu" / "pass_summary.py"


def _episode(stress: float, timing: float, timing_wait: float, spans: list, setup: float | None = None) -> dict:
    stages = {"load": {"status": "passed", "wall_s": 2.0, "lock_wait_s": 0.0},
              "stress": {"status": "passed", "stage_wall_s": stress, "lock_wait_s": 1.0},
              "timing": {"status": "passed", "stage_wall_s": timing, "lock_wait_s": timing_wait}}
    if setup is not None:
        stages["timing"]["setup_s"] = setup
    return {"wall_s": 2.0 + stress + timing, "placement": {"gpus": [0], "gpu_spans": spans},
            "verdict": {"status": "passed", "stages": stages}}


def test_waits_for_the_gpu_lock_are_told_apart_from_timing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    episodes = [_episode(30, 12, 8, [[0, 40]]), _episode(20, 10, 5, [[10, 45]])]
    (run / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    (tmp_path / "segments.txt").write_text("30\n20\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(run), str(tmp_path / "segments.txt")],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("episodes 2 of 34 ({'passed': 2}); segments 2: 30 + 20 = 50 s wall")
    timing_row = next(line for line in lines if line.startswith("timing")).split()
    assert timing_row[1:3] == ["22", "13"]                      # 12 + 10 s, of which 8 + 5 s waiting
    stress_row = next(line for line in lines if line.startswith("stress")).split()
    assert stress_row[1:3] == ["50", "2"]
    assert lines[-1] == "GPUs [0] held by some judge 45 s of 1 x 50 s (90.0 %); timing, alone, 9 s " \
                        "(and 13 s waiting for the GPU)"
    # a judge that makes its timing's inputs under the shared hold says how long: not time alone
    episodes = [_episode(30, 12, 8, [[0, 40]], setup=1.5), _episode(20, 10, 5, [[10, 45]], setup=0.5)]
    (run / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    out = subprocess.run([sys.executable, str(SCRIPT), str(run), str(tmp_path / "segments.txt")],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.stdout.splitlines()[-1] == "GPUs [0] held by some judge 45 s of 1 x 50 s (90.0 %); timing, alone, " \
                                          "7 s (and 13 s waiting for the GPU, 2 s set-up beside other judges' trials)"


def test_rows_give_each_episodes_stages_waits_and_speedup(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    episode = _episode(30, 12, 8, [[0, 40], [40, 52]])
    episode.update(problem="graph/l1/csr_spmv", started_at="t0", finished_at="t1")
    episode["verdict"]["speedup"] = 1.5
    episode["verdict"]["stages"]["stress"]["trials"] = [{"wall_s": 2.0}, {"wall_s": 3.0, "retried_alone": "oom"}]
    episode["verdict"]["stages"]["timing"].update(reference={"median_ms": 3.0}, candidate={"median_ms": 2.0},
                                                  speedup_ci95=[1.4, 1.6])
    episode["verdict"]["stages"]["counters"] = {"status": "passed", "metrics": {"kernel_time_ms": 2.5}}
    episode["verdict"]["flags"] = ["counters:time_below_kernels"]
    episode["verdict"]["stages"]["stress"]["trials"][0]["candidate_restarted"] = "the reference ran out"
    (run / "episodes.jsonl").write_text(json.dumps(episode) + "\n")
    rows = tmp_path / "rows.jsonl"
    out = subprocess.run([sys.executable, str(SCRIPT), str(run), str(tmp_path / "none.txt"), "--rows", str(rows),
                          "--label", "call 2", "--commit", "abc1234"], capture_output=True, text=True, cwd=REPO_ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    assert row["segment"] == "call 2" and row["commit"] == "abc1234" and row["problem"] == "graph/l1/csr_spmv"
    assert row["episode_wall_s"] == 44.0 and row["gpu_spans"] == [[0, 40], [40, 52]]
    assert row["stage_wall_s"] == {"load": 2.0, "stress": 30.0, "timing": 12.0}
    assert row["stage_lock_wait_s"] == {"load": 0.0, "stress": 1.0, "timing": 8.0}
    assert row["trial_wall_s"] == 5.0 and row["retried_alone"] == 1 and row["counters"] == "passed"
    assert (row["reference_ms"], row["candidate_ms"], row["speedup"], row["speedup_ci95"]) == (3.0, 2.0, 1.5, [1.4, 1.6])
    assert row["ncu_kernel_ms"] == 2.5 and row["candidate_restarted"] == 1
    assert row["flags"] == ["counters:time_below_kernels"]
    assert "timed median over ncu's kernel time: lowest 0.80 (graph/l1/csr_spmv), median 0.80, over 1 episodes" in out.stdout
    assert "flags: graph/l1/csr_spmv: counters:time_below_kernels" in out.stdout


def test_the_gpus_samples_and_ncus_exclusive_ranges_are_summarized(tmp_path):
    """How busy the GPU really was (nvidia-smi's samples; an unparsable line is skipped), and how
    long ncu's profiled ranges held it alone."""
    run = tmp_path / "run"
    run.mkdir()
    episodes = [_episode(30, 12, 8, [[0, 40]]), _episode(20, 10, 5, [[10, 45]])]
    episodes[0]["verdict"]["stages"]["counters"] = {"status": "passed", "profiled_s": 7.5, "profiled_lock_wait_s": 3.0}
    episodes[1]["verdict"]["stages"]["counters"] = {"status": "passed", "profiled_s": 2.0}
    (run / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    (tmp_path / "segments.txt").write_text("50\n")
    samples = tmp_path / "gpu.csv"
    samples.write_text("2026/12/02 00:53:25.116, 0 %, 0 MiB\n2026/12/02 00:53:27.119, 60 %, 900 MiB\n"
                       "nvidia-smi: command not found\n2026/12/02 00:53:29.119, 30 %, 1200 MiB\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(run), str(tmp_path / "segments.txt"), "--gpu-samples",
                          str(samples), "--rows", str(tmp_path / "rows.jsonl")],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "ncu profiled ranges, each alone on its GPU: 10 s over 2 episodes (longest 8 s)" in lines
    assert lines[-1] == "GPU samples (3): 30 % busy on average, at 0 % in 33 % of them; memory peak 1,200 MiB"
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["ncu_profiled_s"] for r in rows] == [7.5, 2.0]
    assert [r["ncu_lock_wait_s"] for r in rows] == [3.0, None]
