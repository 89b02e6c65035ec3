"""The Ray executor on a real local cluster: the real `run` (oracle, local sandbox, CPU)
gives the same results as the local executor and resumes across executors; the
stand-in workload on fake GPUs loses no episode when a worker process and then a
whole node are killed mid-run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ray_cluster import REPO_ROOT, driver_env

from orchestrator.agent.records import RunDir
from orchestrator.executors import Progress
from orchestrator.executors.ray_executor import RayExecutor
from orchestrator.executors.standin import StandInWork, comparable, expected_verdict, plan_items

FAST = {"POPCORN_STRESS": "1", "POPCORN_TIMING_ITERS_CPU": "1", "POPCORN_TIMING_WARMUP": "0",
        "POPCORN_TIMING_INPUT_SETS": "1", "POPCORN_DEVICE": "cpu", "POPCORN_SANDBOX": "local"}


def _run(args: list[str], results: Path) -> subprocess.CompletedProcess[str]:
    env = {**driver_env(), **FAST, "POPCORN_RESULTS_DIR": str(results), "POPCORN_CACHE_DIR": str(results / ".cache")}
    return subprocess.run([sys.executable, "-m", "orchestrator", "run", "--quiet", *args], cwd=REPO_ROOT, env=env,
                          text=True, capture_output=True, timeout=600)


def _scored(record: dict) -> dict:
    """What two executors must agree on for one real episode (not timing, placement, paths)."""
    verdict = record["verdict"] or {}
    stages = verdict.get("stages", {})
    return {"episode": record["episode_id"], "status": record["status"], "verdict": verdict.get("status"),
            "failure_class": verdict.get("failure_class"), "artifact": record["artifact"]["sha256"],
            "stress_shapes": [s.get("shape") for s in stages.get("stress", {}).get("shapes", [])],
            "stages": {k: v.get("status") for k, v in stages.items() if isinstance(v, dict)}}


def test_real_sweep_equals_local_and_resumes_across_executors(ray_cluster, tmp_path):
    common = ["--problems", "graph/l1/csr_spmv", "--attempts", "2", "--seed", "11"]
    local = _run([*common, "--run-id", "local", "--max-parallel", "2"], tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    remote = _run([*common, "--run-id", "ray", "--executor", "ray", "--ray-address", ray_cluster.address], tmp_path)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert "ray: 2/2 episode(s) recorded: 2 passed, no failures" in remote.stderr

    local_records = sorted(RunDir(tmp_path / "local").load_records(), key=lambda r: r["episode_id"])
    ray_dir = RunDir(tmp_path / "ray")
    ray_records = sorted(ray_dir.load_records(), key=lambda r: r["episode_id"])
    assert [_scored(r) for r in ray_records] == [_scored(r) for r in local_records]
    for r in ray_records:   # the driver wrote the files; paths point into the driver's run dir
        assert r["placement"]["executor"] == "ray"
        assert (ray_dir.path / r["transcript"]).is_file() and (ray_dir.path / r["artifact"]["path"]).is_file()
        assert r["verdict"]["solution"]["path"] == str(ray_dir.path / r["artifact"]["path"])

    # A run started locally, cut short (one record lost), finished on Ray.
    lines = (tmp_path / "local" / "episodes.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "local" / "episodes.jsonl").write_text(lines[0])
    resumed = _run(["--run-id", "local", "--resume", "--executor", "ray", "--ray-address", ray_cluster.address],
                   tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "1 episode(s) to run, 1 already recorded" in resumed.stderr
    after = sorted(RunDir(tmp_path / "local").load_records(), key=lambda r: r["episode_id"])
    assert [r["placement"]["executor"] for r in after] == (
        ["local", "ray"] if after[0]["episode_id"] == json.loads(lines[0])["episode_id"] else ["ray", "local"])
    assert [_scored(r) for r in after] == [_scored(r) for r in local_records]


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _node_running_an_episode(cluster, pid_dir: Path, run_dir: RunDir, skip: str, fresh_s: float) -> list:
    """[(a worker node, the episodes that started on it less than fresh_s ago)], or [] while none
    did. Only a fresh episode is sure to be still running when the node is removed: one picked
    near its end finished first under CI load (seventh session), and then nothing was lost."""
    recorded = {r["episode_id"] for r in run_dir.load_records()}
    running: dict[str, set[str]] = {}
    for f in pid_dir.glob("*.pid"):
        if f.stem not in recorded | {skip} and time.time() - f.stat().st_mtime < fresh_s:
            running.setdefault(f.read_text().split()[-1], set()).add(f.stem)
    return [(n, running[n.node_id]) for n in cluster.list_all_nodes()
            if n is not cluster.head_node and n.node_id in running][:1]


def test_killing_a_worker_and_a_node_mid_run_loses_no_episode(ray_cluster, tmp_path):
    import ray

    run_dir = RunDir(tmp_path / "run")
    pid_dir = tmp_path / "pids"
    items = plan_items(10, problems=5)
    work = StandInWork(agent_s=2.0, scoring_s=0.5, multi_gpu_every=5, pid_dir=str(pid_dir))
    errors: list[BaseException] = []
    ray.init(address=ray_cluster.address, log_to_driver=False)
    try:
        executor = RayExecutor(ray_cluster.address, retries=3)

        def drive() -> None:
            try:
                executor.run(work, items, run_dir, Progress(len(items), "kill", quiet=True))
            except BaseException as exc:
                errors.append(exc)

        driver = threading.Thread(target=drive, daemon=True)
        driver.start()
        _wait_for(lambda: len(list(pid_dir.glob("*.pid"))) >= 2, 60, "two episodes to start")
        victim = sorted(pid_dir.glob("*.pid"))[0]
        os.kill(int(victim.read_text().split()[0]), signal.SIGKILL)      # a worker process of our cluster dies
        _wait_for(lambda: len(run_dir.load_records()) >= 2, 60, "two episodes to finish")
        busy: list = []   # a node with episodes in flight, so its death is felt
        _wait_for(lambda: busy.extend(_node_running_an_episode(ray_cluster, pid_dir, run_dir, victim.stem,
                                                                  fresh_s=1.0)) or busy,
                  60, "an episode running on a worker node")
        node, on_node = busy[0]
        ray_cluster.remove_node(node, allow_graceful=False)   # a node dies
        driver.join(240)
        assert not driver.is_alive(), "the run did not finish"
        assert not errors, errors
    finally:
        ray.shutdown()
        ray_cluster.add_node(num_cpus=4, num_gpus=2)   # the next tests get the cluster they expect
        ray_cluster.wait_for_nodes()
    records = run_dir.load_records()
    assert sorted(r["episode_id"] for r in records) == sorted(i["episode_id"] for i in items)  # once each
    assert all(r["status"] == "completed" for r in records)
    for r in records:
        assert {k: r["verdict"][k] for k in ("status", "failure_class")} == expected_verdict(r["episode_id"])
        assert (run_dir.path / r["artifact"]["path"]).is_file()
    lost = run_dir.load_records(run_dir.infra_episodes)
    assert lost and all(r["status"] == "infra_error" and r["error"].startswith("ray: ") for r in lost)
    assert victim.stem in {r["episode_id"] for r in lost}
    assert on_node & {r["episode_id"] for r in lost}, "no episode of the removed node was lost and retried"
    # Ray names a removed node's loss NodeDiedError or, when the worker's connection drops
    # first (seen under load), WorkerCrashedError: both are infra_error, retried
    causes = {r["error"].split(":")[1].strip() for r in lost}
    assert causes <= {"WorkerCrashedError", "NodeDiedError"}, causes
    # fake GPUs: single-GPU episodes got one, every 5th got both GPUs of its node, as Ray set them
    for r in records:
        want = 2 if int(r["attempt"]) % 5 == 4 else 1
        assert len(r["standin"]["gpus"]) == want
        assert r["standin"]["cuda_visible_devices"] == ",".join(map(str, r["standin"]["gpus"]))
    # spread over the cluster: the removed node ran episodes (above), and others finished them; every
    # record may come from the survivors (seen on a loaded CI when the node died before any of its
    # episodes had finished)
    assert len({r["placement"]["node_id"] for r in records} | {node.node_id}) >= 2
    # same results as the local executor gives
    local_dir = RunDir(tmp_path / "local")
    from orchestrator.executors import LocalExecutor

    LocalExecutor([0, 1, 2, 3], max_parallel=4).run(StandInWork(agent_s=0.05, scoring_s=0.05, multi_gpu_every=5),
                                                    items, local_dir, Progress(len(items), "local", quiet=True))
    assert sorted(map(comparable, records)) == sorted(map(comparable, local_dir.load_records()))


def test_errors_on_the_cluster(ray_cluster, tmp_path):
    """Too many GPUs asked: one clear line, nothing submitted. A bug escaping one episode:
    its infra_error record (worker traceback), the others run. A bad model configuration
    stops the run."""
    import ray

    from orchestrator.agent.client import ModelConfigError
    from orchestrator.errors import UserError

    items = plan_items(4)
    ray.init(address=ray_cluster.address, log_to_driver=False)
    try:
        executor = RayExecutor(ray_cluster.address)
        with pytest.raises(UserError, match="needs 3 GPU"):
            executor.run(StandInWork(gpus_per_item=3), items, RunDir(tmp_path / "big"), Progress(4, "t", quiet=True))
        assert not (tmp_path / "big" / "episodes.jsonl").exists()

        bad = items[1]["episode_id"]
        run_dir = RunDir(tmp_path / "bug")
        executor.run(StandInWork(agent_s=0.05, scoring_s=0.05, raise_on={bad: "a bug"}), items, run_dir,
                     Progress(4, "t", quiet=True))
        records = {r["episode_id"]: r for r in run_dir.load_records()}
        assert len(records) == 4 and records[bad]["status"] == "infra_error"
        assert "stand-in: a bug" in records[bad]["error"] and 'standin.py", line' in records[bad]["traceback"]
        assert all(r["status"] == "completed" for k, r in records.items() if k != bad)

        with pytest.raises(ModelConfigError, match="rejects this model name"):
            executor.run(StandInWork(agent_s=0.05, scoring_s=0.05, raise_on={bad: "config"}), items,
                         RunDir(tmp_path / "config"), Progress(4, "t", quiet=True))
    finally:
        ray.shutdown()


def test_more_episodes_than_gpus_share_them_and_score_alone(ray_cluster, tmp_path):
    """--max-parallel 8 on 4 GPUs: two episodes per GPU (num_gpus 0.5) think at the same
    time; their scoring holds the GPU exclusively through the host-wide lock."""
    import ray

    run_dir = RunDir(tmp_path / "run")
    items = plan_items(16)
    ray.init(address=ray_cluster.address, log_to_driver=False)
    try:
        RayExecutor(ray_cluster.address, max_parallel=8).run(StandInWork(agent_s=1.0, scoring_s=0.3), items, run_dir,
                                                             Progress(16, "t", quiet=True))
    finally:
        ray.shutdown()
    records = run_dir.load_records()
    assert len(records) == 16 and all(len(r["standin"]["gpus"]) == 1 for r in records)
    by_gpu: dict[int, list] = {}
    for r in records:   # one host: GPU index i of either node takes the same host lock
        by_gpu.setdefault(r["standin"]["gpus"][0], []).append(sorted(r["standin"]["held"]))
    for spans in by_gpu.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "two scorings overlapped on one GPU"
    edges = sorted([(r["standin"]["span"][0], 1) for r in records] + [(r["standin"]["span"][1], -1) for r in records])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak > 4, f"at most {peak} episodes ran at once on 4 GPUs"
