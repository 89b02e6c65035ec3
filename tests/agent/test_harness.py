"""The episode loop driven by the scripted server (real HTTP, real openai client).

Scoring is replaced here by a small recording fake so that the LOOP's logic (turns,
nudges, argument errors, trimming, limits, accounting, infra handling) is tested
without kernels; tests/agent/test_end_to_end.py runs the real pipeline.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
from scripted_server import ScriptedServer, error, slow, text, tool_calls, usage

from orchestrator.agent import prompts
from orchestrator.agent.accounting import Limits, Price
from orchestrator.agent.client import OpenAIChatModel, RetryPolicy
from orchestrator.agent.harness import EpisodeEnv, EpisodeSpec, run_episode
from orchestrator.agent.records import RunDir
from orchestrator.agent.tools import Scoring
from orchestrator.config import REPO_ROOT, Settings
from orchestrator.errors import InfraError

PROBLEM = REPO_ROOT / "problems" / "graph" / "l1" / "csr_spmv"
SCHEMA = json.loads((REPO_ROOT / "schemas" / "result.schema.json").read_text())
GOOD = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, *a):\n        return 0  # CORRECT\n"
BAD = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


def validate_episode(record: dict[str, Any]) -> None:
    jsonschema.validate(record, {**SCHEMA, "$ref": "#/$defs/episode", "oneOf": None} | {"oneOf": [{"$ref": "#/$defs/episode"}]})


def verdict(passed: bool, mode: str) -> dict[str, Any]:
    return {"schema_version": 1, "kind": "verdict", "problem": "graph/l1/csr_spmv", "track": "popcorn2",
            "status": "passed" if passed else "failed", "failure_class": None if passed else "incorrect",
            "failure_detail": "" if passed else "output 0: 7 elements differ",
            "stages": {"correctness": {"status": "passed" if passed else "failed", "shape": {"n_rows": 20000},
                                       "trials": [{"kind": "fresh", "passed": passed}]}},
            "speedup": 1.5 if passed and mode == "full" else None, "device": {"type": "cpu"},
            "sandbox": {"backend": "fake"}, "solution": {"sha256": "0"}}


class FakeScoring:
    """Records every evaluate/analyze call; `CORRECT` in the code means it passes."""

    def __init__(self, huge_findings: bool = False, raise_infra: bool = False):
        self.calls: list[tuple[str, str, Any, Any]] = []
        self.huge_findings, self.raise_infra = huge_findings, raise_infra

    def evaluate(self, entry: Any, path: Any, settings: Any, *, mode: str = "full", sandbox: Any = None,
                 seed: int | None = None) -> dict[str, Any]:
        self.calls.append((mode, Path(path).read_text(), sandbox, seed))
        if self.raise_infra and mode == "full":
            raise InfraError("docker engine went away")
        return verdict("CORRECT" in Path(path).read_text(), mode)

    def analyze(self, source: str, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        n = 5000 if self.huge_findings else 1
        return [{"rule": "hardcoded_shape", "severity": "warning", "line": i + 1, "message": "x" * 20} for i in range(n)]


class CountingSandbox:
    created: list["CountingSandbox"] = []

    def __init__(self) -> None:
        self.closed = False
        CountingSandbox.created.append(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def entry() -> Any:
    manifest = json.loads((PROBLEM / "manifest.json").read_text())
    return SimpleNamespace(id=manifest["id"], path=PROBLEM, manifest=manifest)


def make_env(tmp_path: Path, scoring: FakeScoring, limits: Limits, price: Price | None = None,
             output_limit: int = 4000) -> EpisodeEnv:
    CountingSandbox.created = []
    settings = Settings(results_dir=tmp_path / "results", cache_dir=tmp_path / "cache", device="cpu")
    return EpisodeEnv(settings=settings, run_dir=RunDir(tmp_path / "results" / "r1"),
                      scoring=Scoring(scoring.evaluate, scoring.analyze), device="cpu", device_info={"type": "cpu"},
                      limits=limits, sandbox_factory=lambda spec: CountingSandbox(), price=price,
                      output_limit=output_limit)


def episode(entry: Any, env: EpisodeEnv, server: ScriptedServer, harness: str, retries: int = 2,
            timeout_s: float = 5.0) -> dict[str, Any]:
    model = OpenAIChatModel("scripted", base_url=server.url, api_key="k",
                            policy=RetryPolicy(retries=retries, backoff_s=0.01, request_timeout_s=timeout_s))
    spec = EpisodeSpec(run_id="r1", episode_id="graph.l1.csr_spmv.a0", entry=entry, track="popcorn2",
                       harness=harness, model="scripted", attempt=0, seed=4242)
    record = run_episode(spec, model, env)
    validate_episode(record)
    return record


def test_st_submit_is_scored_with_the_secret_seed(tmp_path, entry):
    scoring = FakeScoring()
    env = make_env(tmp_path, scoring, Limits(max_turns=20), price=Price(prompt=2.0, completion=10.0, cached=1.0))
    with ScriptedServer([tool_calls(("submit", {"code": GOOD}), use=usage(1000, 500, cached=600, reasoning=100))]) as s:
        record = episode(entry, env, s, "st")
    assert record["status"] == "completed" and record["verdict"]["speedup"] == 1.5
    assert scoring.calls == [("full", GOOD, None, 4242)]  # fresh sandbox (none passed), the episode's seed
    assert record["tokens"] == {"prompt": 1000, "completion": 500, "cached": 600, "reasoning": 100, "total": 1500}
    assert record["cost_usd"] == pytest.approx((400 * 2.0 + 600 * 1.0 + 500 * 10.0) / 1e6)
    assert record["turns"] == 1 and record["tools_used"] == {"submit": 1}
    assert CountingSandbox.created == []  # st never needs a tool sandbox
    # the prompt: reference source, disclosed CPU shape, no ranges
    prompt = s.requests[0]["messages"][1]["content"]
    shapes = entry.manifest["shapes"]
    disclosed = json.dumps({k: v.get("cpu_default", v["default"]) for k, v in shapes.items()})
    assert (PROBLEM / "reference.py").read_text().strip() in prompt and disclosed in prompt
    assert f'{shapes["n_rows"]["max"]}' not in prompt  # ranges are not disclosed
    assert [t["function"]["name"] for t in s.requests[0]["tools"]] == ["submit"]
    transcript = json.loads((env.run_dir.path / record["transcript"]).read_text())
    assert transcript["artifact"]["code"] == GOOD and transcript["messages"][-1]["role"] == "tool"
    assert (env.run_dir.path / record["artifact"]["path"]).read_text() == GOOD


def test_st_text_with_a_code_block_counts_as_the_submission(tmp_path, entry):
    scoring = FakeScoring()
    env = make_env(tmp_path, scoring, Limits())
    with ScriptedServer([text(f"Here it is:\n```python\n{GOOD}```\nDone.")]) as s:
        record = episode(entry, env, s, "st")
    assert record["status"] == "completed" and record["artifact"]["via"] == "text"
    assert scoring.calls[0][1] == GOOD


def test_st_text_without_code_is_no_submission(tmp_path, entry):
    scoring = FakeScoring()
    env = make_env(tmp_path, scoring, Limits())
    with ScriptedServer([text("I cannot do this.")]) as s:
        record = episode(entry, env, s, "st")
    assert record["status"] == "no_submission" and record["verdict"] is None and scoring.calls == []
    assert len(s.requests) == 1


def test_mt_default_conversation(tmp_path, entry):
    scoring = FakeScoring(huge_findings=True)
    env = make_env(tmp_path, scoring, Limits(max_turns=10), output_limit=4000)
    script = [
        tool_calls(("check", '{"code": "import torch'), use=usage(100, 10)),             # malformed JSON
        text("Let me think about it.", use=usage(200, 20)),                              # text, no tool
        tool_calls(("check", {"code": BAD}), ("compile", {}), use=usage(300, 30, cached=100)),
        tool_calls(("static_analysis", {"code": GOOD}), ("nonexistent", {}), use=usage(400, 40)),
        tool_calls(("check", {}), use=usage(500, 50, reasoning=25)),                     # reuses GOOD
        tool_calls(("submit", {}), use=usage(600, 60)),
    ]
    with ScriptedServer(script) as s:
        record = episode(entry, env, s, "mt-default")
    assert record["status"] == "completed" and record["verdict"]["status"] == "passed"
    assert record["turns"] == 6 and len(s.requests) == 6
    assert record["tokens"] == {"prompt": 2100, "completion": 210, "cached": 100, "reasoning": 25, "total": 2310}
    assert record["tools_used"] == {"check": 3, "compile": 1, "static_analysis": 1, "nonexistent": 1, "submit": 1}
    assert [c["ok"] for c in record["tool_calls"]] == [False, False, False, True, False, True, True]
    assert [c["turn"] for c in record["tool_calls"]] == [1, 3, 3, 4, 4, 5, 6]
    assert "not a valid JSON object" in s.tool_messages(1)[0]["content"]
    assert s.requests[2]["messages"][-1] == {"role": "user", "content": prompts.NUDGE_TOOL}
    check_bad, compile_reuse = s.tool_messages(3)[-2:]
    assert check_bad["content"].startswith("check: failed (incorrect)") and "7 elements differ" in check_bad["content"]
    assert compile_reuse["content"].startswith("compile: failed")  # compile reused BAD (no code given)
    analysis, unknown = s.tool_messages(4)[-2:]
    assert "characters trimmed" in analysis["content"] and len(analysis["content"]) < 4300
    assert "no tool named 'nonexistent'" in unknown["content"]
    assert [c[0] for c in scoring.calls] == ["check", "compile", "check", "full"]
    assert [c[1] for c in scoring.calls] == [BAD, BAD, GOOD, GOOD]
    # every tool ran in the episode's one sandbox, closed at the end; scoring got none
    assert len(CountingSandbox.created) == 1 and CountingSandbox.created[0].closed
    assert all(c[2] is CountingSandbox.created[0] for c in scoring.calls[:3]) and scoring.calls[3][2] is None


def test_turn_limit_warns_then_stops(tmp_path, entry):
    env = make_env(tmp_path, FakeScoring(), Limits(max_turns=3))
    with ScriptedServer([tool_calls(("check", {"code": BAD}))] * 3) as s:
        record = episode(entry, env, s, "mt-default")
    assert record["status"] == "limit_reached" and "turn limit (3)" in record["error"]
    assert record["turns"] == 3 and len(s.requests) == 3 and record["verdict"] is None
    assert s.requests[2]["messages"][-1] == {"role": "user", "content": prompts.LAST_TURN}
    assert all(m.get("content") != prompts.LAST_TURN for m in s.requests[1]["messages"])


def test_token_limit(tmp_path, entry):
    env = make_env(tmp_path, FakeScoring(), Limits(max_turns=20, max_tokens=250))
    with ScriptedServer([tool_calls(("check", {"code": BAD}), use=usage(100, 20))] * 5) as s:
        record = episode(entry, env, s, "mt-default")
    assert record["status"] == "limit_reached" and "token limit (250)" in record["error"]
    assert record["turns"] == 3 and record["tokens"]["total"] == 360


def test_endpoint_failure_is_infra_and_keeps_what_was_spent(tmp_path, entry):
    env = make_env(tmp_path, FakeScoring(), Limits(max_turns=20))
    with ScriptedServer([tool_calls(("check", {"code": BAD}), use=usage(100, 20))] + [error(500)] * 3) as s:
        record = episode(entry, env, s, "mt-default", retries=2)
    assert record["status"] == "infra_error" and "after 3 attempts" in record["error"]
    assert record["turns"] == 1 and record["tokens"]["total"] == 120 and record["verdict"] is None
    assert CountingSandbox.created[0].closed
    transcript = json.loads((env.run_dir.path / record["transcript"]).read_text())
    assert [r["status"] for r in transcript["retries"]] == [500, 500]


def test_scoring_infra_failure_is_not_charged(tmp_path, entry):
    env = make_env(tmp_path, FakeScoring(raise_infra=True), Limits())
    with ScriptedServer([tool_calls(("submit", {"code": GOOD}))]) as s:
        record = episode(entry, env, s, "st")
    assert record["status"] == "infra_error" and "docker engine went away" in record["error"]
    assert record["verdict"] is None and record["artifact"]["sha256"]


def test_mt_all_gpu_tools_on_a_cpu_and_transient_errors_absorbed(tmp_path, entry):
    env = make_env(tmp_path, FakeScoring(), Limits(max_turns=2))
    script = [error(429),
              tool_calls(("profile", {"code": GOOD}), ("disassemble", {}), use=usage(700, 70)),
              error(500),
              slow(text("this answer comes too late"), 3.0),   # past the client's 1 s timeout
              tool_calls(("submit", {}), use=usage(800, 80))]
    with ScriptedServer(script) as s:
        record = episode(entry, env, s, "mt-all", retries=3, timeout_s=1.0)
    assert len(s.requests) == 5 and record["turns"] == 2
    assert [t["function"]["name"] for t in s.requests[1]["tools"]] == [
        "compile", "check", "specs", "static_analysis", "profile", "disassemble", "roofline", "submit"]
    profile, disassemble = s.tool_messages(2)
    assert "profile needs a CUDA GPU" in profile["content"]
    assert "disassemble needs a CUDA GPU" in disassemble["content"]
    assert record["status"] == "completed" and [c["ok"] for c in record["tool_calls"]] == [False, False, True]
    assert record["tokens"]["total"] == 1650  # only the answers that arrived
    transcript = json.loads((env.run_dir.path / record["transcript"]).read_text())
    assert [r["status"] for r in transcript["retries"]] == [429, 500, None]
    assert transcript["retries"][2]["error"] == "APITimeoutError"
    assert [c["retries"] for c in transcript["calls"]] == [1, 2]


def test_replay_repeats_the_recorded_episode_without_the_model(tmp_path, entry):
    from orchestrator.agent.builtin import ReplayAgent

    scoring = FakeScoring()
    env = make_env(tmp_path / "first", scoring, Limits(max_turns=10))
    with ScriptedServer([tool_calls(("check", {"code": BAD})), tool_calls(("check", {"code": GOOD})),
                         tool_calls(("submit", {}))]) as s:
        original = episode(entry, env, s, "mt-default")
    replay_scoring = FakeScoring()
    replay_env = make_env(tmp_path / "second", replay_scoring, Limits(max_turns=10))
    spec = EpisodeSpec(run_id="r2", episode_id="graph.l1.csr_spmv.a0", entry=entry, track="popcorn2",
                       harness="mt-default", model="replay", attempt=0, seed=1)
    replayed = run_episode(spec, ReplayAgent(str(env.run_dir.path)), replay_env)
    validate_episode(replayed)
    assert [c["name"] for c in replayed["tool_calls"]] == [c["name"] for c in original["tool_calls"]]
    assert [c["ok"] for c in replayed["tool_calls"]] == [False, True, True]
    assert replayed["artifact"]["sha256"] == original["artifact"]["sha256"]
    assert [c[0] for c in replay_scoring.calls] == ["check", "check", "full"]  # the tools ran again
    assert replayed["tokens"]["total"] == 0 and replayed["status"] == "completed"


def test_replay_of_a_shorter_transcript_ends_without_submission(tmp_path, entry):
    from orchestrator.agent.builtin import ReplayAgent

    env = make_env(tmp_path / "first", FakeScoring(), Limits(max_turns=1))
    with ScriptedServer([tool_calls(("check", {"code": BAD}))]) as s:
        episode(entry, env, s, "mt-default")
    spec = EpisodeSpec(run_id="r2", episode_id="x", entry=entry, track="popcorn2", harness="mt-default",
                       model="replay", attempt=0, seed=1)
    replayed = run_episode(spec, ReplayAgent(str(env.run_dir.path / "transcripts")),
                           make_env(tmp_path / "second", FakeScoring(), Limits(max_turns=10)))
    assert replayed["status"] == "no_submission" and replayed["turns"] == 2


def test_a_bug_in_a_tool_is_infra_with_its_traceback_not_a_crash(tmp_path, entry):
    def broken_analyze(source: str, manifest: dict) -> list:
        raise KeyError("rules")

    scoring = FakeScoring()
    env = make_env(tmp_path, scoring, Limits(max_turns=5))
    env.scoring = Scoring(scoring.evaluate, broken_analyze)
    with ScriptedServer([tool_calls(("static_analysis", {"code": GOOD}))]) as s:
        record = episode(entry, env, s, "mt-default")
    assert record["status"] == "infra_error" and record["error"] == "internal: KeyError: 'rules'"
    transcript = json.loads((env.run_dir.path / record["transcript"]).read_text())
    assert "broken_analyze" in transcript["internal_error"]
    assert CountingSandbox.created == [] and scoring.calls == []
