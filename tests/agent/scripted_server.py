"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (real HTTP).

The real `openai` client talks to it. Each POST /v1/chat/completions is answered by the
next `Reply` of the script (or by a responder function): a tool call, text, an HTTP
error with optional Retry-After, or a reply delayed past the client's timeout. Every
request body is kept, so tests can assert what the orchestrator sent back (tool
outputs, trimming notes, nudges). A subprocess orchestrator can use it too: the
server runs in the test's process and the subprocess gets `--base-url server.url`.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def usage(prompt: int = 100, completion: int = 20, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def completion(message: dict[str, Any], finish_reason: str, use: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
                            "model": "scripted", "choices": [{"index": 0, "message": message,
                                                              "finish_reason": finish_reason}]}
    if use is not None:
        body["usage"] = use
    return body


DEFAULT_USAGE: Any = object()  # `use=None` means: the server reports no usage at all


def tool_calls(*calls: tuple[str, Any], use: Any = DEFAULT_USAGE, content: str | None = None) -> Reply:
    """calls: (name, arguments) where arguments is a dict (JSON-encoded here) or a raw string."""
    wire = [{"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for i, (name, args) in enumerate(calls)]
    return Reply(body=completion({"role": "assistant", "content": content, "tool_calls": wire}, "tool_calls",
                                 usage() if use is DEFAULT_USAGE else use))


def text(content: str, use: Any = DEFAULT_USAGE) -> Reply:
    return Reply(body=completion({"role": "assistant", "content": content}, "stop",
                                 usage() if use is DEFAULT_USAGE else use))


def error(status: int, retry_after_ms: int | None = 5, message: str = "scripted error") -> Reply:
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
    return Reply(status=status, body={"error": {"message": message, "type": "scripted", "code": None}},
                 headers=headers)


def slow(reply: Reply, delay_s: float) -> Reply:
    return Reply(reply.status, reply.body, delay_s, reply.headers)


class ScriptedServer:
    """`with ScriptedServer(script) as server:` ... `server.url` is the base URL (…/v1)."""

    def __init__(self, script: list[Reply] | None = None,
                 responder: Callable[[dict[str, Any], int], Reply] | None = None):
        self.script = list(script or [])
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0  # requests being answered at the same time
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server._next(body, self.path)
                server._enter()
                try:
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    self._send(reply)
                finally:
                    server._leave()

            def _send(self, reply: Reply) -> None:
                data = json.dumps(reply.body or {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _next(self, body: dict[str, Any], path: str) -> Reply:
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            if not path.rstrip("/").endswith("/chat/completions"):
                return error(404, None, f"no route {path}")
            if self.script:
                return self.script.pop(0)
            if self.responder is not None:
                return self.responder(body, index)
            return error(500, 5, "script exhausted")

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def tool_messages(self, request_index: int) -> list[dict[str, Any]]:
        """The tool results the orchestrator sent in a given request."""
        return [m for m in self.requests[request_index]["messages"] if m.get("role") == "tool"]
