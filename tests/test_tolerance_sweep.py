"""scripts/tolerance_sweep.py judges fp32 against fp64 with the problem's own comparison."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

from orchestrator.config import REPO_ROOT
from orchestrator.testing import load_script

SCRIPT = REPO_ROOT / "scripts" / "tolerance_sweep.py"
PROBLEM = REPO_ROOT / "problems" / "graph" / "l2" / "pagerank_power_iteration"


def _module():
    return load_script(SCRIPT, "tolerance_sweep")


def test_scaled_tolerance_scales_every_bound_and_keeps_the_rest():
    tol = {"metric": "allclose", "atol": 1e-6, "rtol": 1e-4, "per_output": [{}, {"rtol": 0.2}], "why": "x"}
    half = _module().scaled(tol, 0.5)
    assert half == {"metric": "allclose", "atol": 5e-7, "rtol": 5e-5, "per_output": [{}, {"rtol": 0.1}], "why": "x"}
    assert tol["atol"] == 1e-6  # the manifest's own is untouched


def test_a_problem_whose_fp32_breaks_its_tolerance_is_flagged(tmp_path):
    sweep = _module()
    copy = tmp_path / "pagerank_power_iteration"
    shutil.copytree(PROBLEM, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    rows = sweep.sweep_problem(copy, seeds=1, stress=3, shape_s=60, max_bytes=5e7)
    measured = [r for r in rows if "passes" in r]
    assert measured and all(r["passes"] for r in measured)  # fp32 passes the real tolerance
    manifest["tolerance"] = sweep.scaled(manifest["tolerance"], 1e-4)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    rows = sweep.sweep_problem(copy, seeds=1, stress=3, shape_s=60, max_bytes=5e7)
    assert any(not r["passes"] for r in rows if "passes" in r)


def test_a_shape_cut_inside_a_problems_own_checker_is_skipped_not_failed(tmp_path):
    """check_output turns any Exception into a failed comparison; the sweep's time limit must
    not become one (dls_ik_solver's checker was cut at a large shape and read as FAILS)."""
    copy = tmp_path / "dls_ik_solver"
    shutil.copytree(REPO_ROOT / "problems" / "robotics" / "l2" / "dls_ik_solver", copy)
    with (copy / "reference.py").open("a") as f:
        f.write("\n_check = check_output\n\n\ndef check_output(*args):\n    import time\n    time.sleep(3)\n"
                "    return _check(*args)\n")
    rows = _module().sweep_problem(copy, seeds=1, stress=1, shape_s=1, max_bytes=5e7)
    assert rows and all(r.get("skipped") == "over 1 s" for r in rows), rows


def test_the_command_line_names_a_glob_that_matches_nothing():
    done = subprocess.run([sys.executable, str(SCRIPT), "--problems", "no/such/problem"], capture_output=True,
                          text=True, cwd=REPO_ROOT)
    assert done.returncode == 2 and "no problem matches 'no/such/problem'" in done.stderr
