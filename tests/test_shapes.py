import pytest

from orchestrator.runner.shapes import FormulaError, default_shape, evaluate, satisfies, stress_shapes

PARAMS = {
    "n": {"type": "int", "default": 4096, "cpu_default": 300, "min": 17, "max": 100000, "log": True},
    "d": {"type": "int", "default": 64, "min": 8, "max": 512, "multiple_of": 8},
    "alpha": {"type": "float", "default": 2.1, "min": 1.8, "max": 3.0},
    "mode": {"type": "choice", "default": "a", "choices": ["a", "b"]},
}
CONSTRAINTS = ["n * d <= 2**22", "d % 8 == 0"]


def test_formulas_evaluate_arithmetic_and_reject_code():
    assert evaluate("2 * n * d + max(n, 3)", {"n": 5, "d": 2}) == 25
    assert evaluate("n % 8 == 0 and n <= 2**4", {"n": 16}) is True
    for bad in ("__import__('os')", "n.__class__", "[x for x in range(3)]", "open('f')"):
        with pytest.raises(FormulaError):
            evaluate(bad, {"n": 1})
    with pytest.raises(FormulaError, match="unknown parameter"):
        evaluate("m + 1", {"n": 1})


def test_stress_shapes_are_valid_varied_and_secret_seeded():
    shapes = stress_shapes(PARAMS, CONSTRAINTS, 8, seed=1234, device="cuda")
    assert len(shapes) == 8 and len({tuple(sorted(s.items())) for s in shapes}) == 8
    for s in shapes:
        assert not satisfies(s, CONSTRAINTS), s
        assert 17 <= s["n"] <= 100000 and s["d"] % 8 == 0 and s["mode"] in ("a", "b")
    assert shapes[0]["n"] == 17  # the lower boundary comes first
    assert any(s["n"] % 2 == 1 for s in shapes[2:]), "odd sizes must be drawn"
    assert any(s["n"] & (s["n"] - 1) for s in shapes), "non-power-of-two sizes must be drawn"
    assert default_shape(PARAMS, "cuda") not in shapes
    assert stress_shapes(PARAMS, CONSTRAINTS, 8, seed=1234) == shapes
    assert stress_shapes(PARAMS, CONSTRAINTS, 8, seed=4321) != shapes


def test_cpu_stress_stays_at_or_below_the_cpu_default():
    for s in stress_shapes(PARAMS, CONSTRAINTS, 6, seed=7, device="cpu"):
        assert s["n"] <= 300 and s["d"] <= 64


def test_default_shape_uses_cpu_default_on_cpu():
    assert default_shape(PARAMS, "cpu")["n"] == 300
    assert default_shape(PARAMS, "cuda")["n"] == 4096


def test_boundary_shape_meets_the_constraints_that_the_raw_maxima_break():
    from orchestrator.runner.shapes import boundary_shape, satisfies

    params = {"n": {"type": "int", "min": 8, "max": 4096, "default": 64, "cpu_default": 16},
              "d": {"type": "int", "min": 4, "max": 1024, "default": 32, "cpu_default": 8}}
    constraints = ["n * d <= 2**16"]
    assert satisfies({"n": 4096, "d": 1024}, constraints)  # the raw maxima violate it
    top = boundary_shape(params, constraints, "max")
    assert top is not None and not satisfies(top, constraints)
    assert top["n"] * top["d"] > 2**12  # shrunk towards the limit, not to the minimum
    assert boundary_shape(params, constraints, "min") == {"n": 8, "d": 4}
