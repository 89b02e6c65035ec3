"""Longest-first start order from earlier runs' recorded durations (executors/order.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.agent.records import RunDir
from orchestrator.executors import LocalExecutor, execute
from orchestrator.executors.order import longest_first, order_episodes, recorded_durations
from orchestrator.executors.standin import StandInWork, plan_items


def _items(*problems: str) -> list[dict[str, Any]]:
    return [{"episode_id": f"{p}.a{i}", "problem": p, "attempt": i} for i, p in enumerate(problems)]


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["episode_id"] for item in items]


# ------------------------------------------------------------------ the pure ordering

def test_longest_first_puts_unknown_first_then_descending_with_stable_ties():
    items = _items("a", "new1", "b", "c", "new2", "d", "e")
    expected = {"a": 10.0, "b": 40.0, "c": 10.0, "d": 25.0, "e": 10.0}
    ordered = longest_first(items, expected)
    assert [i["problem"] for i in ordered] == ["new1", "new2", "b", "d", "a", "c", "e"]
    assert sorted(_ids(ordered)) == sorted(_ids(items))             # a permutation: nothing lost or doubled


def test_longest_first_without_history_keeps_the_given_order():
    items = _items("z", "a", "m")
    assert longest_first(items, {}) == items
    assert longest_first(items, {"other": 5.0}) == items


# ------------------------------------------------------------------ history from real run directories

def _record(problem: str, wall_s: float, status: str = "completed", harness: str = "st",
            model: str = "oracle", attempt: int = 0) -> dict[str, Any]:
    return {"schema_version": 1, "kind": "episode", "episode_id": f"{problem.replace('/', '.')}.a{attempt}",
            "problem": problem, "attempt": attempt, "harness": harness, "model": model, "status": status,
            "wall_s": wall_s}


def _write_run(root: Path, name: str, records: list[dict[str, Any]]) -> RunDir:
    run_dir = RunDir(root / name)
    for record in records:
        run_dir.append_record(record)
    return run_dir


def test_durations_are_the_median_of_earlier_runs_of_the_same_harness_and_model(tmp_path):
    _write_run(tmp_path, "first", [
        _record("p/short", 10.0), _record("p/long", 50.0), _record("p/long", 70.0, attempt=1),
        _record("p/short", 999.0, status="infra_error"),                  # a lost worker: not a duration
        _record("p/short", 500.0, harness="mt-default"),                 # another harness
        _record("p/short", 500.0, model="gpt-4o"),                       # another model
    ])
    _write_run(tmp_path, "second", [
        _record("p/short", 14.0), _record("p/long", 60.0), _record("p/limit", 30.0, status="limit_reached"),
        _record("p/lost", 90.0, status="infra_error"),
    ])
    with (tmp_path / "second" / "episodes.jsonl").open("ab") as torn:
        torn.write(b'{"problem": "p/short", "harness": "st", "model": "oracle", "wall_s": 1')   # a crash's torn line
    (tmp_path / "not-a-run").mkdir()

    durations = recorded_durations(tmp_path, "st", "oracle")
    assert durations == {"p/short": 12.0, "p/long": 60.0, "p/limit": 30.0}
    assert recorded_durations(tmp_path, "mt-default", "oracle") == {"p/short": 500.0}
    assert recorded_durations(tmp_path / "missing", "st", "oracle") == {}

    items = _items("p/short", "p/lost", "p/limit", "p/long", "p/new")
    ordered, said = order_episodes(items, "longest-first", tmp_path, "st", "oracle")
    assert [i["problem"] for i in ordered] == ["p/lost", "p/new", "p/long", "p/limit", "p/short"]
    assert said == "order: 3 of 5 episodes longest-first from earlier runs' durations"
    same, said = order_episodes(items, "catalog", tmp_path, "st", "oracle")
    assert same == items and "catalog" in said
    same, said = order_episodes(items, "longest-first", tmp_path, "st", "qwen3")    # no history for this model
    assert same == _items("p/short", "p/lost", "p/limit", "p/long", "p/new") and said.startswith("order: 0 of 5")


# ------------------------------------------------------------------ end to end on two fake GPUs

def _gpu_loads(run_dir: RunDir, seconds: dict[str, float]) -> dict[int, float]:
    """Per GPU, the nominal seconds of the episodes the executor placed on it: when it
    would end with no overhead. Nominal, not measured, so a loaded machine cannot flake it."""
    loads: dict[int, float] = {}
    for record in run_dir.load_records():
        for gpu in record["placement"]["gpus"]:
            loads[gpu] = loads.get(gpu, 0.0) + seconds[record["problem"]]
    return loads


def _start_order(run_dir: RunDir) -> list[str]:
    return [r["problem"] for r in sorted(run_dir.load_records(), key=lambda r: r["started_at"])]


def test_longest_first_from_a_real_earlier_run_ends_no_later_on_two_gpus(tmp_path):
    """A catalog-order run whose long episode is planned last, then the same episodes
    longest-first from that run's own records: the long one starts among the first two
    and the busier GPU carries less."""
    items = plan_items(5, problems=5)
    long_problem = items[-1]["problem"]
    seconds = {item["problem"]: 0.2 for item in items} | {long_problem: 1.6}
    work = StandInWork(agent_s=0.0, scoring_by_problem=seconds)
    results = tmp_path / "results"

    catalog_items, said = order_episodes(items, "longest-first", results, "st", "standin")
    assert catalog_items == items and said.startswith("order: 0 of 5")          # nothing recorded yet
    catalog = RunDir(results / "catalog")
    execute(LocalExecutor([0, 1], max_parallel=2), work, catalog_items, catalog, desc="catalog", quiet=True)

    lpt_items, said = order_episodes(items, "longest-first", results, "st", "standin")
    assert said == "order: 5 of 5 episodes longest-first from earlier runs' durations"
    assert lpt_items[0]["problem"] == long_problem
    lpt = RunDir(results / "lpt")
    execute(LocalExecutor([0, 1], max_parallel=2), work, lpt_items, lpt, desc="lpt", quiet=True)

    assert len(catalog.load_records()) == len(lpt.load_records()) == 5
    assert _start_order(catalog)[-1] == long_problem                            # catalog: the long one last
    assert long_problem in _start_order(lpt)[:2]                                 # longest-first: at once
    catalog_end, lpt_end = max(_gpu_loads(catalog, seconds).values()), max(_gpu_loads(lpt, seconds).values())
    assert lpt_end <= catalog_end
    assert lpt_end == pytest.approx(1.6) and catalog_end >= 1.8


# ------------------------------------------------------------------ `python -m orchestrator run --order`

def test_run_starts_episodes_longest_first_unless_told_catalog(tmp_path, monkeypatch, capsys):
    """The run command orders its episodes from an earlier run's records under the results
    root (same harness and model), says so on stderr, and --order catalog keeps the plan."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "agent"))
    from scripted_server import ScriptedServer, text

    from orchestrator.cli import main as cli_main

    monkeypatch.setenv("POPCORN_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("POPCORN_TEST_KEY", "k")
    _write_run(tmp_path, "earlier", [
        _record("graph/l1/csr_spmm", 5.0, model="scripted"), _record("graph/l1/csr_spmv", 40.0, model="scripted"),
        _record("graph/l1/sddmm", 20.0, model="scripted"), _record("graph/l1/edge_softmax", 90.0, model="other")])
    problems = "graph/l1/csr_spmm,graph/l1/csr_spmv,graph/l1/edge_softmax,graph/l1/sddmm"

    def run(run_id: str, *extra: str) -> tuple[list[str], str]:
        with ScriptedServer(responder=lambda body, index: text(f"no code {index}")) as server:
            code = cli_main(["run", "--harness", "st", "--model", "scripted", "--problems", problems,
                             "--max-parallel", "1", "--run-id", run_id, "--device", "cpu", "--sandbox", "local",
                             "--base-url", server.url, "--api-key-env", "POPCORN_TEST_KEY", "--quiet", *extra])
        err = capsys.readouterr().err
        assert code == 0, err
        return _start_order(RunDir(tmp_path / run_id)), err

    started, err = run("lpt")
    assert "order: 3 of 4 episodes longest-first from earlier runs' durations" in err
    assert started == ["graph/l1/edge_softmax", "graph/l1/csr_spmv", "graph/l1/sddmm", "graph/l1/csr_spmm"]
    started, err = run("as-planned", "--order", "catalog")
    assert "catalog order (--order catalog)" in err
    assert started == problems.split(",")
