"""`python -m orchestrator run`: bad input, and a run killed mid-episode then resumed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from scripted_server import Reply, ScriptedServer, error, text, usage

from orchestrator.agent.records import RunDir
from orchestrator.cli import main as cli_main
from orchestrator.config import REPO_ROOT

SCHEMA = json.loads((REPO_ROOT / "schemas" / "result.schema.json").read_text())


@pytest.mark.parametrize("argv, message", [
    (["--harness", "multi"], "unknown harness 'multi' (known: st, mt-default, mt-all)"),
    (["--track", "gpu"], "unknown track 'gpu'"),
    (["--problems", "nothing/*"], "no problem of track 'popcorn2' matches 'nothing/*'"),
    (["--model", "gpt-x", "--base-url", "https://example.invalid/v1", "--api-key-env", "POPCORN_TEST_NO_KEY"],
     "model 'gpt-x' needs an API key: set $POPCORN_TEST_NO_KEY"),
    (["--resume", "--run-id", "never-ran"], "no run to resume"),
    (["--resume"], "--resume needs --run-id"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POPCORN_RESULTS_DIR", str(tmp_path))
    monkeypatch.delenv("POPCORN_TEST_NO_KEY", raising=False)
    assert cli_main(["run", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def test_existing_run_needs_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POPCORN_RESULTS_DIR", str(tmp_path))
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "run.json").write_text("{}")
    assert cli_main(["run", "--run-id", "r", "--problems", "graph/l1/csr_spmv"]) == 2
    assert "pass --resume to continue it" in capsys.readouterr().err


def _orchestrator(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "run", *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_mid_episode_then_resume_loses_and_doubles_nothing(tmp_path):
    """Six st episodes: a0 text, a1 HTTP 500 (infra_error), a2 text, a3 hangs and the
    orchestrator is SIGKILLed there. --resume re-runs a1 (infra) and a3, then a4, a5."""
    hang = threading.Event()

    def responder(body: dict, index: int) -> Reply:
        if index == 1:
            return error(500, None, "scripted outage")
        if index == 3:
            hang.set()
            return Reply(body=text("too late").body, delay_s=30)
        return text(f"no code in answer {index}", use=usage(10 + index, 1))

    env = {**os.environ, "POPCORN_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO_ROOT),
           "POPCORN_TEST_KEY": "k"}
    run = RunDir(tmp_path / "killed")
    with ScriptedServer(responder=responder) as server:
        common = ["--base-url", server.url, "--api-key-env", "POPCORN_TEST_KEY", "--retries", "0", "--quiet"]
        first = _orchestrator(["--harness", "st", "--model", "scripted", "--problems", "graph/l1/csr_spmv",
                               "--attempts", "6", "--run-id", "killed", "--device", "cpu", *common], env)
        assert hang.wait(120), first.communicate()[1].decode()[-2000:]
        deadline = time.monotonic() + 30
        while len(run.load_records()) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        before = run.load_records()
        assert [(r["episode_id"], r["status"]) for r in before] == [
            ("graph.l1.csr_spmv.a0", "no_submission"), ("graph.l1.csr_spmv.a1", "infra_error"),
            ("graph.l1.csr_spmv.a2", "no_submission")]
        # endpoint, key variable and retries come back from run.json
        second = _orchestrator(["--resume", "--run-id", "killed", "--quiet"], env)
        out, err = second.communicate(timeout=300)
        assert second.returncode == 0, err.decode()[-3000:]
    records = run.load_records()
    ids = [r["episode_id"] for r in records]
    assert sorted(ids) == [f"graph.l1.csr_spmv.a{i}" for i in range(6)]  # each exactly once
    assert all(r["status"] == "no_submission" for r in records)
    assert len(server.requests) == 8  # 6 episodes + the infra one again + the killed one again
    assert [r["episode_id"] for r in run.load_records(run.infra_episodes)] == ["graph.l1.csr_spmv.a1"]
    # the re-run episodes got the answers of requests 4.. (a1 -> 4, a3 -> 5, a4 -> 6, a5 -> 7)
    tokens = {r["episode_id"]: r["tokens"]["prompt"] for r in records}
    assert tokens == {"graph.l1.csr_spmv.a0": 10, "graph.l1.csr_spmv.a1": 14, "graph.l1.csr_spmv.a2": 12,
                      "graph.l1.csr_spmv.a3": 15, "graph.l1.csr_spmv.a4": 16, "graph.l1.csr_spmv.a5": 17}
    for r in records:
        jsonschema.validate(r, {**SCHEMA, "oneOf": [{"$ref": "#/$defs/episode"}]})
        assert (run.path / r["transcript"]).is_file()
    info = run.read_run()
    assert len(info["planned"]) == 6 and info["resumed_at"][0]["infra_records_rerun"] == 1
    assert "6/6 episodes recorded" in out.decode()


def test_torn_last_line_is_dropped_and_repaired(tmp_path):
    run = RunDir(tmp_path)
    run.append_record({"episode_id": "a", "status": "completed"})
    with open(run.episodes, "ab") as f:
        f.write(b'{"episode_id": "b", "sta')  # a crash in the middle of a write
    assert [r["episode_id"] for r in run.load_records()] == ["a"]
    assert run.repair() == len(b'{"episode_id": "b", "sta')
    run.append_record({"episode_id": "b", "status": "completed"})
    assert [r["episode_id"] for r in run.load_records()] == ["a", "b"]
    assert run.repair() == 0


def test_parallel_episodes_each_recorded_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POPCORN_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("POPCORN_TEST_KEY", "k")

    def responder(body: dict, index: int) -> Reply:
        reply = text(f"answer {index}", use=usage(100, 10))
        return Reply(body=reply.body, delay_s=0.4)

    with ScriptedServer(responder=responder) as server:
        code = cli_main(["run", "--harness", "st", "--model", "scripted", "--problems", "graph/l1/csr_spmv",
                         "--attempts", "6", "--parallel", "3", "--run-id", "par", "--device", "cpu",
                         "--base-url", server.url, "--api-key-env", "POPCORN_TEST_KEY", "--quiet"])
    assert code == 0, capsys.readouterr().err
    records = RunDir(tmp_path / "par").load_records()
    assert sorted(r["episode_id"] for r in records) == [f"graph.l1.csr_spmv.a{i}" for i in range(6)]
    assert len(server.requests) == 6 and server.max_in_flight >= 2
    assert sum(r["tokens"]["total"] for r in records) == 660


def test_agent_options_flag_then_run_json_then_default():
    import argparse

    from orchestrator.agent.run import AGENT_DEFAULTS, agent_options

    args = argparse.Namespace(retries=2, tool_timeout_s=None, max_tokens=None)
    got = agent_options(args, {"tool_timeout_s": 30.0, "retries": 9})
    assert got["retries"] == 2 and got["tool_timeout_s"] == 30.0
    assert got["tool_output_limit"] == AGENT_DEFAULTS["tool_output_limit"] and got["max_tokens"] is None
