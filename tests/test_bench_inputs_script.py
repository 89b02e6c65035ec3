"""scripts/bench_inputs.py: seconds to make one input set at a problem's default (H200) shape."""
import json
import subprocess
import sys
from pathlib import Path

from orchestrator.runner.problem import load_problem, tree_bytes
from orchestrator.runner.shapes import default_shape

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "bench_inputs.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_one_problem_row_counts_the_sets_bytes():
    for folder, extra in (("problems/biology/l1/lddt_score", {}),
                          ("problems/probability/l3/distributed_parallel_tempering", {"rank": 0, "world_size": 2})):
        out = _run(folder)
        assert out.returncode == 0, out.stderr[-2000:]
        row = json.loads(out.stdout)
        problem = load_problem(REPO / folder)
        expected = tree_bytes(problem.inputs(default_shape(problem.manifest["shapes"], "cuda"), 1, "cpu", **extra))
        assert row["problem"] == problem.id and row["bytes"] == expected > 0 and row["seconds"] >= 0


def test_a_problem_or_all_but_not_both():
    for args in ((), ("--all", "problems/biology/l1/lddt_score")):
        out = _run(*args)
        assert out.returncode == 2 and "give one problem folder or --all" in out.stderr


def test_a_folder_without_a_manifest_is_one_line():
    out = _run("problems/graph")
    assert out.returncode == 2 and "problems/graph: no manifest.json there" in out.stderr
    assert "Traceback" not in out.stderr
