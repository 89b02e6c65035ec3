import math

import torch

from orchestrator.runner.compare import compare_outputs

ALLCLOSE = {"metric": "allclose", "atol": 1e-5, "rtol": 1e-5, "rel_norm_max": 1e-3}


def test_allclose_passes_small_noise_and_fails_large():
    ref = torch.randn(1000)
    assert compare_outputs(ref + 1e-7, ref, ALLCLOSE).passed
    bad = ref.clone()
    bad[17] += 1.0
    r = compare_outputs(bad, ref, ALLCLOSE)
    assert not r.passed and "(17,)" in r.message


def test_zero_output_fails_even_when_reference_is_tiny():
    ref = torch.randn(1000) * 1e-6  # every element within atol of zero
    r = compare_outputs(torch.zeros_like(ref), ref, ALLCLOSE)
    assert not r.passed and "relative norm" in r.message


def test_nan_inf_shape_dtype_and_count_are_failures():
    ref = torch.randn(10)
    nan = ref.clone()
    nan[3] = math.nan
    assert "NaN" in compare_outputs(nan, ref, ALLCLOSE).message
    assert "shape" in compare_outputs(ref[:5], ref, ALLCLOSE).message
    assert "dtype" in compare_outputs(ref.double(), ref, ALLCLOSE).message
    assert "outputs" in compare_outputs((ref, ref), ref, ALLCLOSE).message
    assert not compare_outputs(None, ref, ALLCLOSE).passed


def test_exact_integers_and_fraction_match():
    ref = torch.arange(100)
    assert compare_outputs(ref.clone(), ref, {"metric": "allclose"}).passed
    off = ref.clone()
    off[5] += 1
    assert not compare_outputs(off, ref, {"metric": "allclose", "atol": 10}).passed
    f = torch.randn(1000)
    near = f.clone()
    near[:5] += 1e-7
    tol = {"metric": "fraction_match", "fraction": 0.99, "atol": 1e-5, "rtol": 0}
    assert compare_outputs(near, f, tol).passed
    near[:50] += 1e-7
    assert not compare_outputs(near, f, tol).passed


def test_fraction_match_min_mismatches_is_a_floor_for_small_outputs():
    ref = torch.linspace(0.5, 1.0, 16)
    out = ref.clone()
    out[:2] -= 0.01  # two of 16 differ: more than 1 %, within atol
    tol = {"metric": "fraction_match", "fraction": 0.99, "atol": 0.05, "rtol": 0, "rel_norm_max": 0.02}
    assert not compare_outputs(out, ref, tol).passed
    floor = {**tol, "min_mismatches": 2}
    result = compare_outputs(out, ref, floor)
    assert result.passed and "at most 2 differing" in result.message
    out[2] -= 0.01
    assert not compare_outputs(out, ref, floor).passed
    big, big_out = torch.linspace(0.5, 1.0, 1000), torch.linspace(0.5, 1.0, 1000)
    big_out[:10] -= 0.01  # the 1 % share still rules when it is larger than the floor
    assert compare_outputs(big_out, big, floor).passed
    ints = torch.arange(16)
    assert compare_outputs(torch.where(ints < 2, ints + 1, ints), ints,
                           {"metric": "fraction_match", "fraction": 0.99, "min_mismatches": 2}).passed


def test_tolerance_scale_bounds_error_by_term_magnitude():
    ref = torch.tensor([1e-3, 5.0])
    out = ref + torch.tensor([1e-3, 0.0])
    tol = {"metric": "allclose", "atol": 0, "rtol": 1e-4, "rel_norm_max": 1e-3}
    assert not compare_outputs(out, ref, tol).passed
    assert compare_outputs(out, ref, tol, scale=torch.tensor([100.0, 5.0])).passed


def test_accept_mismatch_compares_chains_up_to_first_decision_mismatch():
    chains, steps = 200, 30
    x = torch.randn(chains, steps)
    acc = torch.rand(chains, steps) > 0.5
    tol = {"metric": "accept_mismatch", "fraction": 0.99, "atol": 1e-5, "rtol": 1e-5, "decisions_output": 1}
    x2, acc2 = x.clone(), acc.clone()
    acc2[0, 10] = ~acc2[0, 10]
    x2[0, 10:] += 5.0  # diverges after its first mismatch: allowed
    assert compare_outputs((x2, acc2), (x, acc), tol).passed
    x2[1, 3] += 1.0  # wrong before any mismatch: not allowed
    assert not compare_outputs((x2, acc2), (x, acc), tol).passed
    acc3 = acc.clone()
    acc3[:10, 0] = ~acc3[:10, 0]
    assert not compare_outputs((x, acc3), (x, acc), tol).passed


def test_fraction_match_on_integer_outputs():
    ref = torch.arange(10000)
    out = ref.clone()
    out[:5] += 1
    tol = {"metric": "fraction_match", "fraction": 0.999}
    assert compare_outputs(out, ref, tol).passed
    out[:50] += 1
    assert not compare_outputs(out, ref, tol).passed
    assert not compare_outputs(out, ref, {"metric": "allclose"}).passed  # other metrics stay exact


def test_problem_check_output_replaces_the_metric_after_structure_checks(tmp_path):
    from orchestrator.runner.problem import load_problem
    (tmp_path / "manifest.json").write_text('{"id": "t/l1/x", "tolerance": {"metric": "exact", "slack": 1}}')
    (tmp_path / "reference.py").write_text(
        "import torch\n"
        "def check_output(inputs, output, expected, tolerance):\n"
        "    off = int((output - expected).abs().max())\n"
        "    return off <= tolerance['slack'], f'off by at most {off}'\n")
    problem = load_problem(tmp_path)
    ref = torch.arange(6)
    assert problem.compare((), ref + 1, ref).passed          # the metric alone would refuse this
    assert not problem.compare((), ref + 2, ref).passed
    assert "off by at most 2" in problem.compare((), ref + 2, ref).message
    assert not problem.compare((), ref.float(), ref).passed  # dtype is checked before the hook
    assert not problem.compare((), (ref, ref), ref).passed   # so is the number of outputs
    nan = torch.tensor([float("nan")])
    assert not problem.compare((), nan, torch.zeros(1)).passed
    # a set of another size (a contact set missing a near-zero-depth pair) reaches the checker
    assert problem.compare((), torch.arange(5), torch.arange(6)).message.startswith("check_output")
    assert not problem.compare((), torch.arange(6).reshape(2, 3), torch.arange(6)).passed  # other rank: refused


def test_check_output_gets_everything_on_the_reference_outputs_device(tmp_path):
    """On a GPU the candidate's output comes back on the CPU while the reference's stays on
    cuda:0; the checker must not have to mix them (the `meta` device stands in for cuda here)."""
    from orchestrator.runner.problem import load_problem
    (tmp_path / "manifest.json").write_text('{"id": "t/l1/x", "tolerance": {"metric": "exact"}}')
    (tmp_path / "reference.py").write_text(
        "def check_output(inputs, output, expected, tolerance):\n"
        "    devices = {str(t.device) for t in (*inputs, output, expected)}\n"
        "    return devices == {'meta'}, f'devices {sorted(devices)}'\n")
    problem = load_problem(tmp_path)
    result = problem.compare((torch.ones(3),), torch.arange(6), torch.arange(6, device="meta"))
    assert result.passed, result.message


def test_interleaved_timing_alternates_abba_and_warms_each_round():
    from orchestrator.runner.timing import interleaved

    calls: list[tuple[str, int, int]] = []

    def timer(name):
        def run(n, warmup):
            calls.append((name, n, warmup))
            return [name] * n
        return run

    replies = interleaved({"cand": timer("cand"), "ref": timer("ref")}, iters=50, warmup=3, rounds=4)
    assert [c[0] for c in calls] == ["cand", "ref", "ref", "cand", "cand", "ref", "ref", "cand"]
    assert all(n == 13 for _, n, _ in calls)  # ceil(50 / 4) each round
    assert [w for name, _, w in calls if name == "cand"] == [3, 1, 1, 1]
    assert sum(len(r) for r in replies["ref"]) == 52 and replies["cand"][0] == ["cand"] * 13


def test_units_agree_allows_the_share_it_names_and_guards_the_rest():
    from orchestrator.runner.compare import units_agree
    ref = torch.rand(60, 5) + 1.0
    tol = {"atol": 1e-3, "rtol": 1e-3}
    off = ref.clone()
    off[:3] += 1.0  # 3 of 60: exactly the 5 % that fraction 0.95 allows (0.05 * 60 is 2.999... in floats)
    assert units_agree([("x", off, ref, 0)], tol, "runs", 0.95) == (True, "57 of 60 runs agree within atol/rtol")
    off[3] += 1.0
    passed, message = units_agree([("x", off, ref, 0)], tol, "runs", 0.95)
    assert not passed and "only 56 of 60 runs agree" in message
    assert units_agree([("x", off, ref, 0)], {**tol, "min_mismatches": 4}, "runs", 0.95)[0]
    # the run axis may be any axis of a part; a part of another length is refused, not broadcast
    assert units_agree([("x", ref, ref, 0), ("y", ref.T, ref.T, 1)], tol, "runs", 1.0)[0]
    assert not units_agree([("x", ref[:1], ref, 0)], tol, "runs", 0.0)[0]
    assert not units_agree([("x", torch.zeros_like(ref), ref, 0)], tol, "runs", 0.5)[0]
