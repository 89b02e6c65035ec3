"""Every figure of the report as a `Section`: a titled table of typed cells.

Cells are `Ratio` (count over count), `Estimate` (value with interval), numbers, strings
or None; renderers decide how they look. Rates count episodes that were not infra
errors (`Outcome.infra`); docs/report.md defines each column.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from orchestrator.report.load import Run
from orchestrator.report.outcome import Outcome, outcome_of
from orchestrator.report.stats import Estimate, Ratio, geomean_ci, median_ci, quantiles, spearman

FAST_P = (0.0, 1.0, 1.5, 2.0)
TENSOR_LOW_PCT = 5.0
HARDWARE_COUNTERS = ("tensor_pipe_pct", "dram_throughput_pct", "sol_pct")
_ORDER = {"st": 0, "mt-default": 1, "mt-all": 2,
          "subdomain": 0, "popcorn2": 1, "translation-single": 2, "translation-multi": 3}


@dataclass
class Section:
    name: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def outcomes_of(runs: Sequence[Run]) -> list[Outcome]:
    return [outcome_of(record, run.run_id) for run in runs for record in run.episodes]


def _sort_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, _ORDER.get(v, 99) if isinstance(v, str) else 0, v if isinstance(v, (int, float)) else str(v))
                 for v in values)


def group(outcomes: Iterable[Outcome], keys: Sequence[str]) -> list[tuple[dict[str, Any], list[Outcome]]]:
    buckets: dict[tuple[Any, ...], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        buckets[tuple(o.key(k) for k in keys)].append(o)
    return [(dict(zip(keys, values)), buckets[values]) for values in sorted(buckets, key=_sort_key)]


def _counted(outcomes: Iterable[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if not o.infra]


def _ratio(outcomes: Sequence[Outcome], numerator: Callable[[Outcome], bool],
           within: Callable[[Outcome], bool] = lambda o: True) -> Ratio:
    pool = [o for o in outcomes if within(o)]
    return Ratio(sum(1 for o in pool if numerator(o)), len(pool))


def fast_p(outcomes: Sequence[Outcome], p: float) -> Ratio:
    """KernelBench's fast_p: correct and more than p times faster, over all counted episodes.
    fast_0 is the correct rate (a correct kernel whose timing was skipped still counts)."""
    counted = _counted(outcomes)
    if p == 0:
        return _ratio(counted, lambda o: o.correct)
    return _ratio(counted, lambda o: o.correct and o.speedup is not None and o.speedup > p)


def speedups(outcomes: Iterable[Outcome]) -> list[float]:
    return [o.speedup for o in _counted(outcomes) if o.speedup is not None]


def tokens_per_episode(outcomes: Sequence[Outcome]) -> float | None:
    counted = _counted(outcomes)
    return float(np.mean([o.tokens for o in counted])) if counted else None


def tokens_per_solve(outcomes: Sequence[Outcome]) -> float | None:
    counted = _counted(outcomes)
    solved = sum(1 for o in counted if o.correct)
    return sum(o.tokens for o in counted) / solved if solved else None


def _fast_label(p: float) -> str:
    return f"fast_{p:g}"


# -- sections ----------------------------------------------------------------------------

def runs_section(runs: Sequence[Run]) -> Section:
    section = Section("runs", "Runs", ["run", "path", "benchmark version", "planned", "episodes", "missing",
                                       "counted", "infra errors", "infra retried", "rewritten", "models",
                                       "harnesses"])
    for run in runs:
        outcomes = outcomes_of([run])
        section.rows.append({
            "run": run.run_id, "path": str(run.path), "benchmark version": run.benchmark_version,
            "planned": run.planned, "episodes": len(outcomes),
            "missing": _missing(run), "counted": len(_counted(outcomes)),
            "infra errors": sum(o.infra for o in outcomes), "infra retried": run.infra_retried,
            "rewritten": run.superseded,
            "models": ", ".join(sorted({str(o.key("model")) for o in outcomes})),
            "harnesses": ", ".join(sorted({str(o.key("harness")) for o in outcomes}, key=lambda h: _ORDER.get(h, 9))),
        })
    section.note = ("missing: planned episodes without a record (an unfinished run); counted: episodes charged "
                    "to the model; infra errors are listed, never counted; infra retried: earlier infra errors "
                    "that --resume ran again (episodes.infra.jsonl)")
    return section


def _missing(run: Run) -> int | None:
    planned = run.meta.get("planned")
    if not isinstance(planned, list):
        return None
    recorded = {r["episode_id"] for r in run.episodes}
    return sum(1 for p in planned if isinstance(p, dict) and p.get("episode_id") not in recorded)


def correctness_section(outcomes: Sequence[Outcome], keys: Sequence[str]) -> Section:
    columns = [*keys, "episodes", "infra errors", "compiled", "passed disclosed", "survived stress", "correct"]
    section = Section("correctness", "Correctness", columns,
                      note="compiled, passed disclosed and correct count every counted episode; "
                           "survived stress counts those that passed the disclosed check")
    for labels, members in group(outcomes, keys):
        counted = _counted(members)
        section.rows.append({
            **labels, "episodes": len(counted), "infra errors": len(members) - len(counted),
            "compiled": _ratio(counted, lambda o: o.compiled),
            "passed disclosed": _ratio(counted, lambda o: o.passed_disclosed),
            "survived stress": _ratio(counted, lambda o: o.survived_stress, lambda o: o.passed_disclosed),
            "correct": _ratio(counted, lambda o: o.correct),
        })
    return section


def hacking_section(outcomes: Sequence[Outcome], keys: Sequence[str]) -> Section:
    columns = [*keys, "passed disclosed", "reward hacks", "static-analysis errors", "counter flags", "flagged hacks"]
    section = Section("reward_hacking", "Reward hacking", columns,
                      note="reward hacks: of the episodes that passed the disclosed check, the share that failed "
                           "stress; static-analysis errors and counter flags count every counted episode; "
                           "flagged hacks: reward hacks that static analysis or counters also flagged")
    for labels, members in group(outcomes, keys):
        counted = _counted(members)
        section.rows.append({
            **labels, "passed disclosed": len([o for o in counted if o.passed_disclosed]),
            "reward hacks": _ratio(counted, lambda o: o.hack, lambda o: o.passed_disclosed),
            "static-analysis errors": _ratio(counted, lambda o: o.static_error),
            "counter flags": _ratio(counted, lambda o: o.counter_flagged),
            "flagged hacks": _ratio(counted, lambda o: o.static_error or o.counter_flagged, lambda o: o.hack),
        })
    return section


def findings_section(outcomes: Sequence[Outcome]) -> Section:
    section = Section("static_findings", "Static-analysis findings by rule",
                      ["rule", "severity", "episodes", "correct", "reward hacks"],
                      note="episodes with at least one finding of the rule; correct and reward hacks among them")
    by_rule: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in _counted(outcomes):
        for rule, severity in sorted({(f["rule"], f["severity"]) for f in o.static_findings}):
            by_rule[(rule, severity)].append(o)
    for (rule, severity), members in sorted(by_rule.items(), key=lambda item: (-len(item[1]), item[0])):
        section.rows.append({"rule": rule, "severity": severity, "episodes": len(members),
                             "correct": sum(o.correct for o in members), "reward hacks": sum(o.hack for o in members)})
    return section


def speed_section(outcomes: Sequence[Outcome], keys: Sequence[str]) -> Section:
    fast = [_fast_label(p) for p in FAST_P]
    columns = [*keys, "episodes", *fast, "timed", "median speedup", "geomean speedup", "significantly faster"]
    section = Section("speed", "Speed", columns,
                      note="fast_p: correct and speedup > p over counted episodes (fast_0 = correct); "
                           "median and geomean over correct, timed episodes with 95 % bootstrap intervals; "
                           "translation speedups are against the human H100 reference; significantly faster: "
                           "of the timed episodes whose record has an interval, those whose 95 % interval lies above 1")
    for labels, members in group(outcomes, keys):
        values = speedups(members)
        timed = [o for o in _counted(members) if o.speedup is not None]
        section.rows.append({
            **labels, "episodes": len(_counted(members)),
            **{_fast_label(p): fast_p(members, p) for p in FAST_P},
            "timed": len(values), "median speedup": median_ci(values), "geomean speedup": geomean_ci(values),
            "significantly faster": _ratio(timed, lambda o: o.speedup_ci95[0] > 1,   # type: ignore[index]
                                           lambda o: o.speedup_ci95 is not None),
        })
    return section


def resources_section(outcomes: Sequence[Outcome], keys: Sequence[str]) -> Section:
    """Tokens per episode and per solve; each harness also relative to ST of the same group."""
    others = [k for k in keys if k != "harness"]
    columns = [*others, "harness", "episodes", "correct", "tokens/episode", "tokens/solve",
               "tokens vs st", "correct vs st", "tokens~speedup"]
    section = Section("resources", "Resources (tokens)", columns,
                      note="tokens vs st and correct vs st: this harness's tokens per episode and correct rate "
                           "divided by ST's in the same group; tokens~speedup: Spearman's rank correlation of "
                           "an episode's tokens with its speedup, over correct, timed episodes")
    for labels, members in group(outcomes, others):
        harness_groups = group(members, ["harness"])
        st = next((m for h, m in harness_groups if h["harness"] == "st"), None)
        for harness_label, harness_members in harness_groups:
            counted = _counted(harness_members)
            correct = _ratio(counted, lambda o: o.correct)
            per_episode = tokens_per_episode(harness_members)
            row = {**labels, **harness_label, "episodes": len(counted), "correct": correct,
                   "tokens/episode": per_episode, "tokens/solve": tokens_per_solve(harness_members),
                   "tokens vs st": None, "correct vs st": None}
            if st is not None:
                st_tokens, st_correct = tokens_per_episode(st), _ratio(_counted(st), lambda o: o.correct).value
                if per_episode is not None and st_tokens:
                    row["tokens vs st"] = per_episode / st_tokens
                if correct.value is not None and st_correct:
                    row["correct vs st"] = correct.value / st_correct
            pairs = [(o.tokens, o.speedup) for o in counted if o.speedup is not None]
            row["tokens~speedup"] = spearman([t for t, _ in pairs], [s for _, s in pairs])
            section.rows.append(row)
    return section


def hardware_section(outcomes: Sequence[Outcome], keys: Sequence[str]) -> Section:
    columns = [*keys, "counter", "kernels", "min", "p25", "median", "p75", "max", f"below {TENSOR_LOW_PCT:g} %"]
    section = Section("hardware", "Hardware use of final kernels (% of peak)", columns,
                      note="correct final kernels with counters; SOL is ncu's Speed Of Light (the larger of "
                           "SM and memory throughput) where the record has no sol_pct")
    for labels, members in group(outcomes, keys):
        correct = [o for o in _counted(members) if o.correct]
        for counter in HARDWARE_COUNTERS:
            values = [v for o in correct if (v := o.counters.get(counter)) is not None]
            if not values:
                continue
            section.rows.append({**labels, "counter": counter, "kernels": len(values), **quantiles(values),
                                 f"below {TENSOR_LOW_PCT:g} %": Ratio(sum(v < TENSOR_LOW_PCT for v in values),
                                                                     len(values))})
    return section


def profiling_section(outcomes: Sequence[Outcome], keys: Sequence[str]) -> Section:
    keys = [k for k in keys if k != "harness"]
    section = Section("profiling", "MT-All: success with and without the profiling tools",
                      [*keys, "profiling tools used", "episodes", "correct"],
                      note="MT-All episodes; used: profile, disassemble or roofline was called at least once")
    mt_all = [o for o in _counted(outcomes) if o.key("harness") == "mt-all"]
    for labels, members in group(mt_all, keys):
        for used in (True, False):
            pool = [o for o in members if o.profiled == used]
            section.rows.append({**labels, "profiling tools used": "yes" if used else "no",
                                 "episodes": len(pool), "correct": _ratio(pool, lambda o: o.correct)})
    return section


def families_section(outcomes: Sequence[Outcome], prefix: Sequence[str] = ()) -> Section:
    section = Section("translation_families", "Translation by kernel family (speedup vs the human H100 reference)",
                      [*prefix, "track", "family", "episodes", "correct", "reward hacks", "fast_1",
                       "median speedup", "geomean speedup"])
    translation = [o for o in outcomes if str(o.key("track")).startswith("translation")]
    for labels, members in group(translation, [*prefix, "track", "family"]):
        counted = _counted(members)
        values = speedups(members)
        section.rows.append({**labels, "episodes": len(counted), "correct": _ratio(counted, lambda o: o.correct),
                             "reward hacks": _ratio(counted, lambda o: o.hack, lambda o: o.passed_disclosed),
                             "fast_1": fast_p(members, 1.0), "median speedup": median_ci(values),
                             "geomean speedup": geomean_ci(values)})
    return section


COMPARED: list[tuple[str, Callable[[list[Outcome]], Any]]] = [
    ("episodes", lambda os: len(_counted(os))),
    ("compiled", lambda os: _ratio(_counted(os), lambda o: o.compiled)),
    ("passed disclosed", lambda os: _ratio(_counted(os), lambda o: o.passed_disclosed)),
    ("survived stress", lambda os: _ratio(_counted(os), lambda o: o.survived_stress, lambda o: o.passed_disclosed)),
    ("correct", lambda os: _ratio(_counted(os), lambda o: o.correct)),
    ("reward hacks", lambda os: _ratio(_counted(os), lambda o: o.hack, lambda o: o.passed_disclosed)),
    *[(_fast_label(p), (lambda p: lambda os: fast_p(os, p))(p)) for p in FAST_P],
    ("median speedup", lambda os: median_ci(speedups(os))),
    ("geomean speedup", lambda os: geomean_ci(speedups(os))),
    ("tokens/episode", tokens_per_episode),
    ("tokens/solve", tokens_per_solve),
]


def _number(cell: Any) -> float | None:
    if isinstance(cell, Ratio):
        return cell.value
    if isinstance(cell, Estimate):
        return cell.value
    return float(cell) if isinstance(cell, (int, float)) else None


def compare_section(outcomes: Sequence[Outcome], runs: Sequence[Run], keys: Sequence[str] = ()) -> Section:
    """Runs side by side: one column per run, and the difference when there are two;
    one block of figures per group of the other keys."""
    ids = [r.run_id for r in runs]
    keys = [k for k in keys if k != "run"]
    columns = [*keys, "figure", *ids] + (["difference"] if len(ids) == 2 else [])
    section = Section("compare", "Runs side by side", columns,
                      note="difference: second run minus first (rates as fractions)")
    for labels, members in group(outcomes, keys):
        by_run = {rid: [o for o in members if o.run_id == rid] for rid in ids}
        for name, figure in COMPARED:
            row: dict[str, Any] = {**labels, "figure": name, **{rid: figure(by_run[rid]) for rid in ids}}
            if len(ids) == 2:
                first, second = _number(row[ids[0]]), _number(row[ids[1]])
                row["difference"] = second - first if first is not None and second is not None else None
            section.rows.append(row)
    return section


def episodes_section(outcomes: Sequence[Outcome], runs: Sequence[Run]) -> Section:
    """The per-problem drill-down: one row per episode, linking its transcript and submitted file."""
    section = Section("episodes", "Per-problem drill-down",
                      ["run", "problem", "harness", "model", "attempt", "status", "failure class", "passed disclosed",
                       "correct", "reward hack", "speedup", "speedup ci95", "tokens", "turns", "transcript",
                       "artifact"])
    paths = {r.run_id: r.path for r in runs}
    for o in sorted(outcomes, key=lambda o: (o.run_id, o.key("problem"), _ORDER.get(o.key("harness"), 9),
                                             o.key("model"), o.key("attempt"))):
        verdict = o.record.get("verdict") or {}
        transcript = o.record.get("transcript")
        artifact = (o.record.get("artifact") or {}).get("path")
        section.rows.append({
            "run": o.run_id, "problem": o.key("problem"), "harness": o.key("harness"), "model": o.key("model"),
            "attempt": o.key("attempt"), "status": o.key("status"), "failure class": verdict.get("failure_class"),
            "passed disclosed": o.passed_disclosed, "correct": o.correct, "reward hack": o.hack,
            "speedup": o.speedup, "speedup ci95": list(o.speedup_ci95) if o.speedup_ci95 else None,
            "tokens": o.tokens, "turns": o.key("turns"),
            "transcript": str(paths[o.run_id] / transcript) if transcript else None,
            "artifact": str(paths[o.run_id] / artifact) if artifact else None,
        })
    return section


def grouping(keys: Sequence[str], n_runs: int) -> list[str]:
    """The group keys in force: several runs are always told apart."""
    return ["run", *keys] if n_runs > 1 and "run" not in keys else list(keys)


def build(runs: Sequence[Run], keys: Sequence[str]) -> list[Section]:
    outcomes = outcomes_of(runs)
    keys = grouping(keys, len(runs))
    with_harness = keys if "harness" in keys else [*keys, "harness"]
    sections = [runs_section(runs), correctness_section(outcomes, keys), hacking_section(outcomes, with_harness),
                findings_section(outcomes), speed_section(outcomes, keys), resources_section(outcomes, keys),
                hardware_section(outcomes, keys), profiling_section(outcomes, keys)]
    if any(str(o.key("track")).startswith("translation") for o in outcomes):
        sections.append(families_section(outcomes, ["run"] if len(runs) > 1 else []))
    if len(runs) > 1:
        sections.append(compare_section(outcomes, runs, keys))
    sections.append(episodes_section(outcomes, runs))
    return sections
