"""Every problem's inputs are a function of (shape, seed) alone.

Hidden-shape scoring, the fp32-vs-fp64 calibration and a third party's rerun all draw inputs again
from a seed and expect the same tensors; a generator that depends on thread scheduling (index_put
with repeated indices on the CPU once did) makes those comparisons flaky instead of exact.
"""
import pytest

from orchestrator.catalog import problem_entries
from orchestrator.config import REPO_ROOT
from orchestrator.runner.compare import as_tuple
from orchestrator.runner.problem import load_problem, tree_digest
from orchestrator.runner.shapes import default_shape

ENTRIES = problem_entries(REPO_ROOT / "problems")
KEY = b"same-seed-inputs"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_inputs_repeat_for_a_seed(entry):
    problem = load_problem(entry.path)
    shape = default_shape(entry.manifest["shapes"], "cpu")
    first = as_tuple(problem.inputs(shape, 7, "cpu"))
    again = as_tuple(problem.inputs(shape, 7, "cpu"))
    # the judge's own bitwise comparison of tensor trees (shape, dtype, keyed hash of the bytes)
    differing = [i for i, (a, b) in enumerate(zip(first, again)) if tree_digest(a, KEY) != tree_digest(b, KEY)]
    assert len(first) == len(again) and not differing, f"{entry.id}: inputs {differing} differ between two draws"
