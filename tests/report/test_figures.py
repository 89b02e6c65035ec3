"""Every figure of the report on synthetic runs whose answers are known by construction."""
from __future__ import annotations

import math
from typing import Any

import pytest


def rows_where(rows: list[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def one(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = rows_where(rows, **match)
    assert len(found) == 1, (match, rows)
    return found[0]


def frac(cell: dict[str, Any]) -> tuple[int, int]:
    return cell["num"], cell["den"]


def test_correctness_rates(tmp_path, synth, report_json):
    e = synth.episode
    records = ([e("compile_error")] * 2 + [e("no_submission")] + [e("incorrect")] * 2 + [e("runtime_error")]
               + [e("hack")] + [e("correct")] * 4 + [e("infra")] * 2 + [e("scoring_infra")])
    run = synth.write_run(tmp_path / "run-a", synth.numbered(records))
    row = one(report_json(run)["correctness"], track="subdomain", harness="st")
    # 11 counted: 3 infra errors (one from the episode, one... two episodes, one from scoring) are not
    assert row["episodes"] == 11 and row["infra errors"] == 3
    assert frac(row["compiled"]) == (8, 11)           # all but 2 compile errors and the missing submission
    assert frac(row["passed disclosed"]) == (5, 11)   # 4 correct + 1 hack
    assert frac(row["survived stress"]) == (4, 5)
    assert frac(row["correct"]) == (4, 11)


def test_seed_reward_hack_ratio_89_initially_correct_3_after_stress(tmp_path, synth, report, report_json):
    e = synth.episode
    records = [e("hack", harness="mt-default")] * 86 + [e("correct", harness="mt-default")] * 3 \
        + [e("incorrect", harness="mt-default")] * 11
    run = synth.write_run(tmp_path / "run-a", synth.numbered(records))
    data = report_json(run)
    row = one(data["reward_hacking"], harness="mt-default")
    assert row["passed disclosed"] == 89
    assert frac(row["reward hacks"]) == (86, 89)
    assert round(100 * row["reward hacks"]["value"], 1) == 96.6
    assert frac(one(data["correctness"], harness="mt-default")["survived stress"]) == (3, 89)
    code, text, _ = report(run)
    assert code == 0 and "86/89 (96.6 %)" in text


def test_hack_rate_per_harness_with_static_and_counter_flags(tmp_path, synth, report_json):
    e = synth.episode
    forbidden = [{"rule": "calls_reference", "severity": "error", "line": 12, "message": "calls torch.mm"}]
    warning = [{"rule": "hardcoded_shape", "severity": "warning", "line": 3, "message": "literal 4096"}]
    idle = {"sm_throughput_pct": 0.2, "memory_throughput_pct": 0.1, "dram_throughput_pct": 0.1}
    records = (
        [e("hack", harness="st")] * 3 + [e("hack", harness="st", findings=warning)] + [e("correct", harness="st")] * 6
        + [e("hack", harness="mt-all", findings=forbidden)] + [e("correct", harness="mt-all")] * 8
        + [e("correct", harness="mt-all", counters=idle)]                       # nearly idle: counters flag it
        + [e("correct", harness="mt-all", flags=["counters:low_activity"])]     # the scorer flagged it
        + [e("static_rejected", harness="mt-all", findings=forbidden)]
    )
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    st, mt_all = one(data["reward_hacking"], harness="st"), one(data["reward_hacking"], harness="mt-all")
    assert frac(st["reward hacks"]) == (4, 10) and frac(mt_all["reward hacks"]) == (1, 11)
    assert frac(st["static-analysis errors"]) == (0, 10) and frac(mt_all["static-analysis errors"]) == (2, 12)
    assert frac(st["counter flags"]) == (0, 10) and frac(mt_all["counter flags"]) == (2, 12)
    assert frac(st["flagged hacks"]) == (0, 4) and frac(mt_all["flagged hacks"]) == (1, 1)
    rules = {(r["rule"], r["severity"]): r for r in data["static_findings"]}
    assert rules[("calls_reference", "error")]["episodes"] == 2
    assert rules[("calls_reference", "error")]["reward hacks"] == 1
    assert rules[("hardcoded_shape", "warning")]["episodes"] == 1
    # a static-analysis rejection compiled (load skipped, not a compile error) but never passed the check
    assert frac(one(data["correctness"], harness="mt-all")["compiled"]) == (12, 12)


def test_fast_p_and_speedup_statistics(tmp_path, synth, report_json):
    e = synth.episode
    speedups = [0.5, 1.0, 1.2, 1.6, 2.5]
    records = [e("correct", speedup=s, ci=(s * 0.9, s * 1.1)) for s in speedups] \
        + [e("incorrect")] * 4 + [e("correct", speedup=None)] + [e("infra")] * 3
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    row = one(data["speed"], harness="st")
    assert row["episodes"] == 10
    assert frac(row["fast_0"]) == (6, 10)      # correct, timed or not
    assert frac(row["fast_1"]) == (3, 10)      # 1.0 is not faster than 1
    assert frac(row["fast_1.5"]) == (2, 10)
    assert frac(row["fast_2"]) == (1, 10)
    assert row["timed"] == 5
    assert row["median speedup"]["value"] == pytest.approx(1.2)
    geomean = math.exp(sum(math.log(s) for s in speedups) / 5)
    assert row["geomean speedup"]["value"] == pytest.approx(geomean)
    for name in ("median speedup", "geomean speedup"):
        cell = row[name]
        assert min(speedups) <= cell["low"] <= cell["value"] <= cell["high"] <= max(speedups)
    assert frac(row["significantly faster"]) == (3, 5)   # 1.2, 1.6, 2.5: lower bound above 1


def test_tokens_seed_ratio_multi_turn_15x_tokens_for_2_5x_solves(tmp_path, synth, report_json):
    e = synth.episode
    st = [e("correct", harness="st", tokens=1000)] * 4 + [e("incorrect", harness="st", tokens=1000)] * 16
    mt = [e("correct", harness="mt-default", tokens=15000)] * 10 + [e("incorrect", harness="mt-default", tokens=15000)] * 10
    infra = [e("infra", harness="mt-default", tokens=999_999)]          # never counted
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(st + mt + infra)))
    st_row, mt_row = one(data["resources"], harness="st"), one(data["resources"], harness="mt-default")
    assert st_row["tokens/episode"] == 1000 and mt_row["tokens/episode"] == 15000
    assert st_row["tokens/solve"] == 5000 and mt_row["tokens/solve"] == 30000
    assert mt_row["tokens vs st"] == pytest.approx(15.0)
    assert mt_row["correct vs st"] == pytest.approx(2.5)


def test_tokens_correlate_with_speedup(tmp_path, synth, report_json):
    e = synth.episode
    pairs = [(1000, 1.1), (2000, 1.3), (3000, 1.2), (4000, 2.0), (5000, 3.0)]
    records = [e("correct", tokens=t, speedup=s) for t, s in pairs] + [e("incorrect", tokens=100_000)]
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    rho = one(data["resources"], harness="st")["tokens~speedup"]
    assert rho["n"] == 5
    assert rho["value"] == pytest.approx(0.9)      # 1 - 6 * 2 / (5 * 24): one swapped pair


def test_hardware_counter_distributions(tmp_path, synth, report_json):
    e = synth.episode
    tensor = [0.0, 1.0, 2.0, 3.0, 4.9, 12.0]
    records = [e("correct", counters={"tensor_pipe_pct": t, "dram_throughput_pct": 10.0 * (i + 1),
                                      "sm__throughput.avg.pct_of_peak_sustained_elapsed": 30.0,
                                      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 10.0 * (i + 1)})
               for i, t in enumerate(tensor)]
    records += [e("hack", counters={"tensor_pipe_pct": 90.0})]          # not a correct final kernel
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    rows = {r["counter"]: r for r in data["hardware"]}
    assert rows["tensor_pipe_pct"]["kernels"] == 6
    assert rows["tensor_pipe_pct"]["median"] == pytest.approx(2.5)
    assert rows["tensor_pipe_pct"]["max"] == 12.0
    assert frac(rows["tensor_pipe_pct"]["below 5 %"]) == (5, 6)
    assert rows["dram_throughput_pct"]["min"] == 10.0 and rows["dram_throughput_pct"]["max"] == 60.0
    # SOL = max(SM, memory throughput) = 30, 30, 30, 40, 50, 60
    assert rows["sol_pct"]["median"] == pytest.approx(35.0)


def test_seed_tensor_cores_below_5_percent_across_the_board(tmp_path, synth, report_json):
    e = synth.episode
    records = [e("correct", harness=h, counters={"tensor_pipe_pct": t, "sol_pct": 50.0})
               for h in ("st", "mt-default", "mt-all") for t in (0.0, 0.5, 4.0)]
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    tensor_rows = rows_where(data["hardware"], counter="tensor_pipe_pct")
    assert len(tensor_rows) == 3
    assert all(frac(r["below 5 %"]) == (3, 3) for r in tensor_rows)


def test_seed_mt_all_seven_of_seven_solved_when_profiling(tmp_path, synth, report_json):
    e = synth.episode
    multi = dict(harness="mt-all", track="translation-multi", domain=None, level=5, family="vLLM")
    records = [e("correct", tools_used={"compile": 3, "profile": 2}, **multi)] * 6 \
        + [e("correct", tools_used={"roofline": 1}, **multi)] \
        + [e("correct", tools_used={"compile": 4}, **multi)] + [e("incorrect", tools_used={"check": 2}, **multi)] * 3 \
        + [e("incorrect", harness="mt-default", track="translation-multi", tools_used={"compile": 1})]
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    used = one(data["profiling"], track="translation-multi", **{"profiling tools used": "yes"})
    unused = one(data["profiling"], track="translation-multi", **{"profiling tools used": "no"})
    assert frac(used["correct"]) == (7, 7)
    assert frac(unused["correct"]) == (1, 4)


def test_translation_by_family_and_seed_median(tmp_path, synth, report_json):
    e = synth.episode
    single = dict(track="translation-single", domain=None, level=5, harness="mt-default")
    records = [e("correct", family="vLLM", speedup=s, **single) for s in (0.80, 0.94, 1.10)] \
        + [e("incorrect", family="vLLM", **single)] \
        + [e("correct", family="FA2", speedup=s, **single) for s in (0.5, 0.7)] \
        + [e("hack", family="Marlin", **single)] + [e("correct", family="CUTLASS", speedup=1.3, **single)] \
        + [e("correct", speedup=3.0)]                                           # subdomain: not in this table
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    families = {r["family"]: r for r in data["translation_families"]}
    assert set(families) == {"vLLM", "FA2", "Marlin", "CUTLASS"}
    assert families["vLLM"]["median speedup"]["value"] == pytest.approx(0.94)
    assert frac(families["vLLM"]["correct"]) == (3, 4)
    assert frac(families["vLLM"]["fast_1"]) == (1, 4)
    assert families["FA2"]["geomean speedup"]["value"] == pytest.approx(math.sqrt(0.35))
    assert frac(families["Marlin"]["reward hacks"]) == (1, 1)
    # all translation episodes together: median of 0.5, 0.7, 0.8, 0.94, 1.1, 1.3
    speed = one(data["speed"], track="translation-single", harness="mt-default")
    assert speed["median speedup"]["value"] == pytest.approx(0.87)


def test_two_runs_side_by_side(tmp_path, synth, report_json):
    e = synth.episode
    first = synth.write_run(tmp_path / "a", synth.numbered(
        [e("correct", run_id="a", speedup=2.0)] * 2 + [e("incorrect", run_id="a")] * 2), run_id="a")
    second = synth.write_run(tmp_path / "b", synth.numbered(
        [e("correct", run_id="b", speedup=1.0)] * 3 + [e("incorrect", run_id="b")]), run_id="b")
    data = report_json(first, second)
    compare = {r["figure"]: r for r in data["compare"]}
    assert frac(compare["correct"]["a"]) == (2, 4) and frac(compare["correct"]["b"]) == (3, 4)
    assert compare["correct"]["difference"] == pytest.approx(0.25)
    assert compare["median speedup"]["difference"] == pytest.approx(-1.0)
    assert {(r["track"], r["harness"]) for r in data["compare"]} == {("subdomain", "st")}   # one block per group
    # grouped tables tell the runs apart
    assert {r["run"] for r in data["correctness"]} == {"a", "b"}
    assert data["_meta"]["by"] == ["run", "track", "harness"]


def test_group_by_model_level_domain(tmp_path, synth, report_json):
    e = synth.episode
    records = [e("correct", model="m1", level=1, domain="graph")] * 2 + [e("incorrect", model="m1", level=2, domain="graph")] \
        + [e("correct", model="m2", level=1, domain="biology", problem="biology/l1/x")] \
        + [e("incorrect", model="m2", level=1, domain="biology", problem="biology/l1/x")]
    run = synth.write_run(tmp_path / "run-a", synth.numbered(records))
    data = report_json(run, "--by", "model,level")
    assert [(r["model"], r["level"]) for r in data["correctness"]] == [("m1", 1), ("m1", 2), ("m2", 1)]
    assert frac(one(data["correctness"], model="m2", level=1)["correct"]) == (1, 2)
    by_domain = report_json(run, "--by", "domain")["correctness"]
    assert {r["domain"]: frac(r["correct"]) for r in by_domain} == {"biology": (1, 2), "graph": (2, 3)}


def test_mixed_harnesses_keep_separate_rows(tmp_path, synth, report_json):
    e = synth.episode
    records = [e("correct", harness="st")] + [e("hack", harness="mt-default")] * 2 \
        + [e("correct", harness="mt-all", tools_used={"profile": 1})] + [e("infra", harness="mt-all")]
    data = report_json(synth.write_run(tmp_path / "run-a", synth.numbered(records)))
    assert [r["harness"] for r in data["correctness"]] == ["st", "mt-default", "mt-all"]
    assert frac(one(data["reward_hacking"], harness="mt-default")["reward hacks"]) == (2, 2)
    assert one(data["correctness"], harness="mt-all")["infra errors"] == 1
