"""The model client: chat completions with tools against any OpenAI-compatible endpoint.

Failures are sorted by whose fault they are (the `openai` exceptions are translated here,
at the boundary):

* rate limits (429), server errors (5xx), timeouts and dropped connections are retried
  with exponential backoff (honouring Retry-After); when the retries run out they raise
  `ModelEndpointError`, an `InfraError`: the episode is recorded as infra_error and is
  not charged to the model;
* 401/403/404 (bad key, unknown model or URL) raise `ModelConfigError`, a `UserError`:
  every episode would fail the same way, so the run stops with one line;
* a request over the model's context window raises `ContextLimitExceeded`: the model's
  own conversation grew too long, so the episode ends as limit_reached.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from orchestrator.errors import InfraError, UserError


class ModelEndpointError(InfraError):
    """The endpoint kept failing (429/5xx/timeouts) after every retry."""


class ModelConfigError(UserError):
    """The endpoint refused the configuration (key, model name, URL)."""


class ContextLimitExceeded(Exception):
    """The conversation no longer fits the model's context window."""


@dataclass
class Usage:
    """Token counts of one call, or the sum over an episode."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def add(self, other: "Usage") -> None:
        self.prompt += other.prompt
        self.completion += other.completion
        self.cached += other.cached
        self.reasoning += other.reasoning

    def to_dict(self) -> dict[str, int]:
        return {"prompt": self.prompt, "completion": self.completion, "cached": self.cached,
                "reasoning": self.reasoning, "total": self.total}


@dataclass
class ModelTurn:
    """One answer of the model: the assistant message (OpenAI wire format) and its cost."""

    message: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    wall_s: float = 0.0
    retries: int = 0
    finish_reason: str | None = None
    usage_reported: bool = True
    gave_up: bool = False          # a built-in agent has nothing more to say

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])

    @property
    def text(self) -> str:
        return str(self.message.get("content") or "")


class Agent(Protocol):
    """Anything that answers a conversation: a real model or a built-in agent."""

    name: str

    def start_episode(self, problem_id: str, attempt: int, context: dict[str, Any]) -> None: ...

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> ModelTurn: ...


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 6
    backoff_s: float = 1.0        # first wait; doubles each retry
    max_backoff_s: float = 60.0
    request_timeout_s: float = 600.0

    def wait_s(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None and 0 <= retry_after_s <= 300:
            return retry_after_s
        base = min(self.backoff_s * 2.0 ** attempt, self.max_backoff_s)
        return float(base * (0.75 + 0.25 * random.random()))


def _retry_after_s(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            return None
    return None


def _is_context_overflow(exc: Exception) -> bool:
    text = f"{getattr(exc, 'code', '')} {exc}".lower()
    return any(s in text for s in ("context_length_exceeded", "maximum context length",
                                   "context window", "too many tokens", "prompt is too long"))


def parse_usage(raw: Any) -> tuple[Usage, bool]:
    """Usage from a chat completion; (zeros, False) when the server sent none."""
    if raw is None:
        return Usage(), False
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    completion_details = getattr(raw, "completion_tokens_details", None)
    return Usage(
        prompt=int(getattr(raw, "prompt_tokens", 0) or 0),
        completion=int(getattr(raw, "completion_tokens", 0) or 0),
        cached=int(getattr(prompt_details, "cached_tokens", 0) or 0),
        reasoning=int(getattr(completion_details, "reasoning_tokens", 0) or 0),
    ), True


def _message_dict(message: Any) -> dict[str, Any]:
    """The assistant message as a plain dict that can be sent back on the next turn."""
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    calls = []
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        calls.append({
            "id": call.id,
            "type": "function",
            "function": {"name": getattr(function, "name", ""), "arguments": getattr(function, "arguments", "") or ""},
        })
    if calls:
        out["tool_calls"] = calls
    # Reasoning text some servers return (vLLM, DeepSeek): kept for the transcript only.
    extra = getattr(message, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        if extra.get(key):
            out[f"_{key}"] = extra[key]
    return out


class OpenAIChatModel:
    """`openai.OpenAI(...).chat.completions.create` with our own retry accounting.

    The SDK's retries are switched off (max_retries=0) so that every retry is counted and
    recorded in the transcript; the policy is the SDK's: exponential backoff with jitter,
    Retry-After honoured.
    """

    def __init__(self, model: str, *, base_url: str | None, api_key: str,
                 policy: RetryPolicy = RetryPolicy(), temperature: float | None = None,
                 max_completion_tokens: int | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        import openai

        self.name = model
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                                     timeout=policy.request_timeout_s)
        self.policy = policy
        self.temperature = temperature
        self.max_completion_tokens = max_completion_tokens
        self._sleep = sleep
        self.retry_log: list[dict[str, Any]] = []

    def start_episode(self, problem_id: str, attempt: int, context: dict[str, Any]) -> None:
        self.retry_log = []

    def _request(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
        kwargs: dict[str, Any] = {"model": self.name, "messages": [_wire(m) for m in messages]}
        if tools:
            kwargs["tools"] = list(tools)
            kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_completion_tokens is not None:
            kwargs["max_completion_tokens"] = self.max_completion_tokens
        return self._client.chat.completions.create(**kwargs)

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> ModelTurn:
        oa = self._openai
        start = time.monotonic()
        attempt = 0
        while True:
            try:
                response = self._request(messages, tools)
                break
            except (oa.AuthenticationError, oa.PermissionDeniedError, oa.NotFoundError) as exc:
                raise ModelConfigError(f"the endpoint refused model {self.name!r}: {_short(exc)}") from exc
            except oa.BadRequestError as exc:
                if _is_context_overflow(exc):
                    raise ContextLimitExceeded(_short(exc)) from exc
                raise ModelEndpointError(f"the endpoint rejected the request: {_short(exc)}") from exc
            except (oa.RateLimitError, oa.InternalServerError, oa.APITimeoutError,
                    oa.APIConnectionError, oa.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                if isinstance(exc, oa.APIStatusError) and status is not None and status < 500 \
                        and status not in (408, 409, 429):
                    raise ModelEndpointError(f"HTTP {status} from the endpoint: {_short(exc)}") from exc
                if attempt >= self.policy.retries:
                    raise ModelEndpointError(
                        f"model endpoint failed after {attempt + 1} attempts: {type(exc).__name__}: {_short(exc)}"
                    ) from exc
                wait = self.policy.wait_s(attempt, _retry_after_s(exc))
                self.retry_log.append({"attempt": attempt, "error": type(exc).__name__,
                                       "status": status, "wait_s": round(wait, 3)})
                self._sleep(wait)
                attempt += 1
        if not getattr(response, "choices", None):
            raise ModelEndpointError("the endpoint answered without any choice")
        choice = response.choices[0]
        usage, reported = parse_usage(getattr(response, "usage", None))
        return ModelTurn(message=_message_dict(choice.message), usage=usage,
                         wall_s=time.monotonic() - start, retries=attempt,
                         finish_reason=choice.finish_reason, usage_reported=reported)


def _wire(message: dict[str, Any]) -> dict[str, Any]:
    """Drop our transcript-only keys (those starting with '_') before sending."""
    return {k: v for k, v in message.items() if not k.startswith("_")}


def _short(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments: JSON object; raw newlines inside strings are tolerated
    (a frequent slip when a model writes code into a JSON string)."""
    if not raw or not raw.strip():
        return {}
    value = json.loads(raw, strict=False)
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value
