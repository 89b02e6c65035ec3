"""The local executor with the CPU stand-in workload, and the GPU holds around a real
sandbox and the real scoring pipeline."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from orchestrator.agent.records import RunDir
from orchestrator.executors import LocalExecutor, Progress, execute, failures_by_class
from orchestrator.executors.gpus import GpuPool
from orchestrator.executors.standin import StandInWork, expected_verdict, plan_items
from orchestrator.executors.work import LeasedEvaluate, LeasedSandbox


def _overlaps(spans: list[tuple[float, float]]) -> bool:
    spans = sorted(spans)
    return any(a_end > b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_every_episode_recorded_once_with_its_files(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    items = plan_items(10, problems=3)
    execute(LocalExecutor([0, 1], max_parallel=4), StandInWork(agent_s=0.2, scoring_s=0.1), items, run_dir,
            desc="t", quiet=True)
    records = run_dir.load_records()
    assert sorted(r["episode_id"] for r in records) == sorted(i["episode_id"] for i in items)
    for r in records:
        assert {k: r["verdict"][k] for k in ("status", "failure_class")} == expected_verdict(r["episode_id"])
        assert (run_dir.path / r["transcript"]).is_file() and (run_dir.path / r["artifact"]["path"]).is_file()
        assert r["placement"]["executor"] == "local" and len(r["placement"]["gpus"]) == 1
        (start, end), = r["placement"]["gpu_spans"]            # the stand-in's one scoring hold, 0.1 s
        assert end - start == pytest.approx(r["placement"]["gpu_scoring_s"], abs=0.01) and end - start >= 0.09


def test_gpus_are_shared_while_thinking_and_exclusive_while_scoring(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    items = plan_items(12)
    work = StandInWork(agent_s=0.4, scoring_s=0.1, multi_gpu_every=4)   # every 4th needs both GPUs
    executor = LocalExecutor([0, 1], max_parallel=6)
    assert executor.pool.slots_per_gpu == 3
    started = time.monotonic()
    executor.run(work, items, run_dir, Progress(len(items), "t", quiet=True))
    wall = time.monotonic() - started
    records = run_dir.load_records()
    assert len(records) == 12
    held = {0: [], 1: []}
    for r in records:
        for gpu in r["standin"]["gpus"]:
            held[gpu].append(tuple(r["standin"]["held"]))
    assert not _overlaps(held[0]) and not _overlaps(held[1])
    multi = [r for r in records if int(r["attempt"]) % 4 == 3]
    assert len(multi) == 3 and all(r["standin"]["gpus"] == [0, 1] for r in multi)
    # Episodes ran concurrently (12 x 0.5 s one after another would be 6 s).
    assert wall < 0.6 * 12 * 0.5
    assert sum(executor.pool.busy_seconds().values()) == pytest.approx(
        sum(r["standin"]["held"][1] - r["standin"]["held"][0] for r in records for _ in r["standin"]["gpus"]), rel=0.05)


def test_a_bad_model_configuration_stops_new_episodes_and_keeps_finished_records(tmp_path):
    from orchestrator.agent.client import ModelConfigError

    run_dir = RunDir(tmp_path / "run")
    items = plan_items(20)
    work = StandInWork(agent_s=0.05, scoring_s=0.05, raise_on={items[3]["episode_id"]: "config"})
    with pytest.raises(ModelConfigError, match="rejects this model name"):
        LocalExecutor([0], max_parallel=2).run(work, items, run_dir, Progress(20, "t", quiet=True))
    recorded = [r["episode_id"] for r in run_dir.load_records()]
    assert 3 <= len(recorded) < 19 and items[3]["episode_id"] not in recorded
    assert len(set(recorded)) == len(recorded)


def test_any_other_error_is_that_episodes_infra_error_and_the_run_goes_on(tmp_path):
    import jsonschema

    from orchestrator.config import REPO_ROOT

    run_dir = RunDir(tmp_path / "run")
    items = plan_items(6)
    bad = items[2]["episode_id"]
    LocalExecutor([0, 1], max_parallel=3).run(StandInWork(agent_s=0.05, scoring_s=0.05, raise_on={bad: "a bug"}),
                                              items, run_dir, Progress(6, "t", quiet=True))
    records = {r["episode_id"]: r for r in run_dir.load_records()}
    assert len(records) == 6 and records[bad]["status"] == "infra_error"
    assert "RuntimeError: stand-in: a bug" in records[bad]["error"] and "Traceback" in records[bad]["traceback"]
    assert all(r["status"] == "completed" for k, r in records.items() if k != bad)
    schema = json.loads((REPO_ROOT / "schemas" / "result.schema.json").read_text())
    jsonschema.validate(records[bad], {**schema, "oneOf": [{"$ref": "#/$defs/episode"}]})


def test_failure_summary_by_class():
    records = [{"status": "completed", "verdict": {"status": "passed"}},
               {"status": "completed", "verdict": {"status": "failed", "failure_class": "incorrect"}},
               {"status": "completed", "verdict": {"status": "failed", "failure_class": "incorrect"}},
               {"status": "infra_error", "verdict": None}, {"status": "no_submission", "verdict": None}]
    assert failures_by_class(records) == "1 passed; failures by class: incorrect 2, infra_error 1, no_submission 1"
    assert failures_by_class(records[:1]) == "1 passed, no failures"


# ------------------------------------------------------------------ holds around real parts

def _settings(tmp_path: Path):
    from orchestrator.config import Settings

    return Settings(device="cpu", sandbox="local", results_dir=tmp_path / "results", cache_dir=tmp_path / "cache",
                    stress=1, timing_iters_cpu=1, timing_warmup=0, timing_input_sets=1)


def _hold_gpu(lease, seconds: float, hold: str = "shared") -> threading.Event:
    """Another episode's tool call on the same GPU (`hold="exclusive"`: its measurement), for
    `seconds`; returns once it holds."""
    holding = threading.Event()

    def tool_call() -> None:
        with getattr(lease, hold)():
            holding.set()
            time.sleep(seconds)

    threading.Thread(target=tool_call, daemon=True).start()
    assert holding.wait(5)
    return holding


def test_a_leased_sandbox_exec_waits_for_the_gpu(tmp_path):
    from orchestrator.sandbox.base import SandboxSpec, create

    pool = GpuPool([0], slots_per_gpu=2)
    mine, other = pool.acquire(1), pool.acquire(1)
    with LeasedSandbox(create("local", SandboxSpec()), mine.exclusive) as box:
        _hold_gpu(other, 1.0)
        started = time.monotonic()
        result = box.exec(["true"], timeout_s=30)
        assert result.returncode == 0 and time.monotonic() - started >= 0.9
        assert box.workdir and box.python          # everything else passes through


def test_scoring_holds_the_gpu_for_the_judge_only_and_shares_it_with_tool_calls(tmp_path):
    """The judge's exec holds the lease's scoring hold: static analysis holds nothing, the
    judge waits for another episode's measurement (exclusive) but not for its tool calls
    (shared); a timing is kept alone by the judge's own lock files (test_local_sandbox)."""
    from orchestrator import catalog
    from orchestrator.scoring import pipeline

    settings = _settings(tmp_path)
    entry = catalog.find(settings, "graph/l1/csr_spmv")
    pool = GpuPool([0], slots_per_gpu=2)
    mine, other = pool.acquire(1), pool.acquire(1)
    evaluate = LeasedEvaluate(pipeline.evaluate, mine, "run", "ep")

    hack = tmp_path / "hack.py"   # rejected by static analysis on the host: no GPU needed
    hack.write_text((entry.path / "reference.py").read_text().replace("class Model(", "class ModelNew(")
                    + "\nimport reference\n")
    _hold_gpu(other, 3.0)
    started = time.monotonic()
    verdict = evaluate(entry, hack, settings, mode="full", seed=1)
    assert time.monotonic() - started < 2.5, "static analysis waited for the GPU"
    assert verdict["failure_class"] in ("hack_detected", "compile_error")
    assert pool.busy_seconds()[0] == 0.0

    broken = tmp_path / "broken.py"  # passes static analysis; the judge runs (and fails) under the hold
    broken.write_text("import torch\nraise RuntimeError('no kernel yet')\n\n"
                      "class ModelNew(torch.nn.Module):\n    def forward(self, *a):\n        return a[0]\n")
    _hold_gpu(other, 2.0, hold="exclusive")
    started = time.monotonic()
    verdict = evaluate(entry, broken, settings, mode="full", seed=1)
    assert time.monotonic() - started >= 1.5, "the judge ran while another episode measured the GPU"
    assert verdict["status"] == "failed" and verdict["sandbox"]["backend"] == "local"
    assert pool.busy_seconds()[0] > 0.0
    assert len(mine.spans) == 1 and mine.spans[0][1] - mine.spans[0][0] == pytest.approx(mine.scoring_s, abs=0.01)

    _hold_gpu(other, 60.0)          # a long tool call of another episode: the judge does not wait for it
    started = time.monotonic()
    verdict = evaluate(entry, broken, settings, mode="full", seed=1)
    assert time.monotonic() - started < 45, "the judge waited for another episode's tool call"
    assert verdict["status"] == "failed" and len(mine.spans) == 2


def test_a_real_episode_under_a_gpu_lease(tmp_path):
    """AgentWork with the built-in oracle:tools agent (every mt-default tool, then submit),
    the real tools in a real local sandbox and the real scoring, under a lease of GPU 0
    (the device is the CPU; the lease's holds are what is tested): the tools' sandbox
    holds the GPU shared, scoring holds it exclusively, the record says so."""
    from orchestrator.agent.accounting import Limits
    from orchestrator.agent.builtin import builtin_agent
    from orchestrator.agent.harness import EpisodeEnv, EpisodeSpec
    from orchestrator.agent.run import sandbox_factory
    from orchestrator.agent.tools import Scoring
    from orchestrator.executors import AgentWork

    settings = _settings(tmp_path)
    run_dir = RunDir(tmp_path / "run")
    env = EpisodeEnv(settings=settings, run_dir=run_dir, scoring=Scoring.real(), device="cpu",
                     device_info={"type": "cpu"}, limits=Limits(max_turns=4),
                     sandbox_factory=sandbox_factory(settings, "cpu", []))
    work = AgentWork(env, lambda: builtin_agent("oracle:tools"), "run", 5,
                     {"track": "popcorn2", "harness": "mt-default", "model": "oracle:tools"})
    item = {"episode_id": "graph.l1.csr_spmv.a0", "problem": "graph/l1/csr_spmv", "attempt": 0}
    assert work.gpus_needed(item, 2) == 0          # a CPU run leases nothing ...
    lease = GpuPool([0]).acquire(1)                # ... so lease GPU 0 by hand
    bound = work.bound_env(item, lease, run_dir)
    assert bound.settings.gpus == "0" and isinstance(bound.scoring.evaluate, LeasedEvaluate)
    box = bound.sandbox_factory(EpisodeSpec(run_id="run", episode_id=item["episode_id"], entry=work._entry(item),
                                            track="popcorn2", harness="mt-default", model="oracle:tools",
                                            attempt=0, seed=1))
    assert isinstance(box, LeasedSandbox)
    box.close()

    record = work(item, lease, run_dir)
    assert record["status"] == "completed" and record["verdict"]["status"] == "passed", record["error"]
    assert set(record["tools_used"]) >= {"compile", "check", "specs", "static_analysis", "submit"}
    assert lease.scoring_s > 0.5                   # the judge ran under the scoring hold


def test_gpus_an_episode_needs(tmp_path):
    """One GPU; world_size GPUs for a collectives problem (manifest default, --world-size);
    none on a CPU. A world larger than --gpus is refused before anything runs."""
    from orchestrator.agent.accounting import Limits
    from orchestrator.agent.harness import EpisodeEnv
    from orchestrator.agent.tools import Scoring
    from orchestrator.executors import AgentWork

    def work(device: str, **overrides) -> AgentWork:
        settings = _settings(tmp_path).model_copy(update={"device": device, **overrides})
        env = EpisodeEnv(settings=settings, run_dir=RunDir(tmp_path), scoring=Scoring.real(), device=device,
                         device_info={}, limits=Limits(), sandbox_factory=lambda spec: None)
        return AgentWork(env, lambda: None, "run", 1, {"track": "subdomain", "harness": "st", "model": "oracle"})

    single = {"episode_id": "a", "problem": "graph/l1/csr_spmv", "attempt": 0}
    ranks = {"episode_id": "b", "problem": "probability/l3/distributed_particle_filter", "attempt": 0}
    assert work("cuda").gpus_needed(single, 8) == 1
    assert work("cuda").gpus_needed(ranks, 8) == 2                  # the manifest's default world size
    assert work("cuda", world_size=4).gpus_needed(ranks, 8) == 4
    assert work("cpu").gpus_needed(ranks, 8) == 0
    from orchestrator.errors import UserError

    with pytest.raises(UserError, match="needs 4 GPUs .one per rank.; --gpus gives 3"):
        LocalExecutor([0, 1, 2]).run(work("cuda", world_size=4), [single, ranks], RunDir(tmp_path / "r"),
                                     Progress(2, "t", quiet=True))
    assert not (tmp_path / "r" / "episodes.jsonl").exists()


def _try_flock(path: str) -> bool:
    """Whether another process could take `path` exclusively right now."""
    import subprocess
    import sys

    code = ("import fcntl, sys; f = open(sys.argv[1], 'a')\n"
            "try: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError: sys.exit(1)")
    return subprocess.run([sys.executable, "-c", code, path]).returncode == 0


def test_a_measurement_holds_lease_then_host_locks_and_its_execs_do_not_wait_on_themselves():
    from orchestrator.sandbox.base import SandboxSpec, create
    from orchestrator.sandbox.gpu_holds import measuring

    gpu = 97   # a GPU index no real run uses: only its lock file matters here
    pool = GpuPool([gpu], slots_per_gpu=2)
    mine, other = pool.acquire(1), pool.acquire(1)
    box = LeasedSandbox(create("local", SandboxSpec(gpus=(gpu,))), mine.shared, mine.exclusive)
    other_ran = []
    with box:
        with measuring(box, profiler=True):
            def tool_call() -> None:
                with other.shared():
                    other_ran.append(time.monotonic())

            waiter = threading.Thread(target=tool_call, daemon=True)
            waiter.start()
            assert box.exec(["true"], timeout_s=30).returncode == 0   # inside its own hold: no self-wait
            assert not _try_flock(f"/tmp/popcorn-gpu{gpu}.lock") and not _try_flock("/tmp/popcorn-profiler.lock")
            time.sleep(0.5)
            assert not other_ran          # another episode's tool call waits for the measurement
            released = time.monotonic()
        waiter.join(5)
        assert other_ran and other_ran[0] >= released
        assert _try_flock(f"/tmp/popcorn-gpu{gpu}.lock") and _try_flock("/tmp/popcorn-profiler.lock")


def _taken_within(hold, seconds: float) -> bool:
    """Whether a thread gets `hold` (a lease's context manager) within `seconds`; it lets go at once."""
    got = threading.Event()

    def take() -> None:
        with hold():
            got.set()

    threading.Thread(target=take, daemon=True).start()
    return got.wait(seconds)


def test_a_measurement_whose_process_takes_the_lock_files_itself_only_counts_as_busy():
    """Scoring's ncu, where the profiled process takes this host's lock files itself (and, with
    counters_overlap, the profiler lock around its profiled range): the lease holds the busy
    accounting only, so another episode's tool call and another scoring's ncu start meanwhile."""
    from orchestrator.sandbox.base import SandboxSpec, create
    from orchestrator.sandbox.gpu_holds import measuring

    gpu = 96
    pool = GpuPool([gpu], slots_per_gpu=2)
    mine, other = pool.acquire(1), pool.acquire(1)
    box = LeasedSandbox(create("local", SandboxSpec(gpus=(gpu,))), mine.scoring, mine.exclusive)
    with box:
        with measuring(box, profiler=False, lock_files=False):
            assert _taken_within(other.shared, 2), "another episode's tool call waited for the measurement"
            assert _taken_within(other.exclusive, 2), "another episode's measurement waited for this one"
            assert box.exec(["true"], timeout_s=30).returncode == 0
            assert _try_flock(f"/tmp/popcorn-gpu{gpu}.lock") and _try_flock("/tmp/popcorn-profiler.lock")
            time.sleep(0.2)
        with measuring(box, profiler=True):             # a measurement from the host: the GPU alone
            assert not _taken_within(other.shared, 0.5)
    assert pool.busy_seconds()[gpu] >= 0.2 and len(mine.spans) == 2


def test_busy_share_from_records_counts_overlapping_scorings_once():
    """The busy share of a run read back from its records (bench_executors compare, pass_summary):
    the union of the scorings' spans per GPU (they overlap on one GPU), or older records'
    exclusive seconds."""
    from orchestrator.executors.gpus import held_seconds

    records = [{"placement": {"gpus": [0], "gpu_spans": [[0.0, 4.0]]}},
               {"placement": {"gpus": [0], "gpu_spans": [[1.0, 3.0], [5.0, 6.0]]}},
               {"placement": {"gpus": [0, 1], "gpu_spans": [[3.5, 5.5]]}}]
    assert held_seconds(records, 0) == pytest.approx(6.0)     # [0, 6] covered once
    assert held_seconds(records, 1) == pytest.approx(2.0)
    older = [{"placement": {"gpus": [0], "gpu_exclusive_s": 2.5}}, {"placement": {"gpus": [0], "gpu_exclusive_s": 1.0}}]
    assert held_seconds(older, 0) == pytest.approx(3.5)
