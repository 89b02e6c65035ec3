"""scripts/gpu/pass_summary.py: a (resumed) pass's wall time and where its episodes' time went,
with the waits for the GPU lock told apart from the work (its GPU runs are in docs/verification.md)."""
import json
import subprocess
import sys

from orchestrator.config import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu" / "pass_summary.py"


def _episode(stress: float, timing: float, timing_wait: float, spans: list) -> dict:
    stages = {"load": {"status": "passed", "wall_s": 2.0, "lock_wait_s": 0.0},
              "stress": {"status": "passed", "stage_wall_s": stress, "lock_wait_s": 1.0},
              "timing": {"status": "passed", "stage_wall_s": timing, "lock_wait_s": timing_wait}}
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
