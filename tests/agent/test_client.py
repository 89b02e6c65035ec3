"""The model client against the scripted server: the real `openai` client over HTTP."""
from __future__ import annotations

import time

import pytest
from scripted_server import ScriptedServer, error, slow, text, tool_calls, usage

from orchestrator.agent.client import (ContextLimitExceeded, ModelConfigError, ModelEndpointError,
                                       OpenAIChatModel, RetryPolicy, parse_arguments)
from orchestrator.errors import InfraError, UserError

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {}}}}]


def client(server: ScriptedServer, **policy: float) -> OpenAIChatModel:
    defaults = {"retries": 3, "backoff_s": 0.01, "request_timeout_s": 5.0}
    return OpenAIChatModel("scripted-model", base_url=server.url, api_key="k",
                           policy=RetryPolicy(**{**defaults, **policy}))


def test_tool_call_and_all_token_counts():
    with ScriptedServer([tool_calls(("submit", {"code": "x"}), use=usage(1234, 56, cached=1000, reasoning=40))]) as s:
        turn = client(s).complete(MESSAGES, TOOLS)
    assert turn.tool_calls[0]["function"]["name"] == "submit"
    assert parse_arguments(turn.tool_calls[0]["function"]["arguments"]) == {"code": "x"}
    assert (turn.usage.prompt, turn.usage.completion, turn.usage.cached, turn.usage.reasoning) == (1234, 56, 1000, 40)
    assert turn.usage.total == 1290 and turn.retries == 0 and turn.usage_reported
    sent = s.requests[0]
    assert sent["model"] == "scripted-model" and sent["tools"] == TOOLS and sent["messages"] == MESSAGES


def test_missing_usage_is_flagged_not_invented():
    with ScriptedServer([text("hello", use=None)]) as s:
        turn = client(s).complete(MESSAGES, TOOLS)
    assert turn.text == "hello" and not turn.usage_reported and turn.usage.total == 0


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_transient_errors_with_backoff(status):
    with ScriptedServer([error(status), error(status), text("ok")]) as s:
        model = client(s)
        turn = model.complete(MESSAGES, TOOLS)
    assert turn.text == "ok" and turn.retries == 2 and len(s.requests) == 3
    assert [r["status"] for r in model.retry_log] == [status, status]
    assert all(r["wait_s"] == pytest.approx(0.005) for r in model.retry_log)  # retry-after-ms honoured


def test_timeout_is_retried():
    with ScriptedServer([slow(text("late"), 2.0), text("on time")]) as s:
        model = client(s, request_timeout_s=0.5)
        t0 = time.monotonic()
        turn = model.complete(MESSAGES, TOOLS)
    assert turn.text == "on time" and turn.retries == 1
    assert model.retry_log[0]["error"] == "APITimeoutError"
    assert time.monotonic() - t0 < 2.0


def test_persistent_server_errors_are_infra():
    with ScriptedServer([error(500)] * 4) as s:
        with pytest.raises(ModelEndpointError, match="after 4 attempts") as info:
            client(s).complete(MESSAGES, TOOLS)
    assert isinstance(info.value, InfraError) and len(s.requests) == 4


def test_bad_key_stops_the_run():
    with ScriptedServer([error(401, None, "invalid api key")]) as s:
        with pytest.raises(ModelConfigError, match="invalid api key") as info:
            client(s).complete(MESSAGES, TOOLS)
    assert isinstance(info.value, UserError) and len(s.requests) == 1


def test_context_overflow_is_the_models_limit():
    with ScriptedServer([error(400, None, "This model's maximum context length is 8192 tokens")]) as s:
        with pytest.raises(ContextLimitExceeded):
            client(s).complete(MESSAGES, TOOLS)


def test_connection_refused_is_infra():
    with ScriptedServer() as s:
        url = s.url
    model = OpenAIChatModel("m", base_url=url, api_key="k", policy=RetryPolicy(retries=1, backoff_s=0.01))
    with pytest.raises(ModelEndpointError, match="APIConnectionError"):
        model.complete(MESSAGES, TOOLS)


def test_arguments_tolerate_raw_newlines_but_not_garbage():
    assert parse_arguments('{"code": "line1\nline2"}') == {"code": "line1\nline2"}
    assert parse_arguments("") == {}
    with pytest.raises(ValueError):
        parse_arguments('{"code": ')
    with pytest.raises(ValueError):
        parse_arguments('["code"]')
