"""Built-in agents for demos and tests, chosen by `--model`:

- `oracle`: submits the problem's shipped solution (problems/<id>/solutions/oracle.py, or
  the first `solutions/oracle*` file, e.g. a translation task's .cu);
- `oracle:tools`: calls every tool of the harness once on that solution, then submits
  (the GPU verification of the tools uses it);
- `replay:DIR`: replays the assistant messages of the transcripts in DIR (a run
  directory or its transcripts/ folder), matched by problem and attempt; the tools are
  re-executed for real, so a replay re-measures what the recorded model did.

They speak the same protocol as a real model (ModelTurn), so the harness loop, the
records and the accounting are the same; their token counts are zero.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from orchestrator.agent.client import ModelTurn
from orchestrator.errors import UserError


def _tool_call(index: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{index}_{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


class OracleAgent:
    """Submits the oracle; with `every_tool`, first calls every other tool on it."""

    def __init__(self, every_tool: bool = False):
        self.every_tool = every_tool
        self.name = "oracle:tools" if every_tool else "oracle"
        self._code: str | None = None
        self._turn = 0

    def start_episode(self, problem_id: str, attempt: int, context: dict[str, Any]) -> None:
        entry = context["entry"]
        path = getattr(entry, "oracle", None) or Path(entry.path) / "solutions" / "oracle.py"
        self._code = Path(path).read_text() if Path(path).is_file() else None
        self._turn = 0

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> ModelTurn:
        self._turn += 1
        if self._code is None:
            return ModelTurn({"role": "assistant", "content": "This problem ships no oracle solution."},
                             gave_up=True)
        names = [t["function"]["name"] for t in tools]
        if self.every_tool and self._turn == 1 and len(names) > 1:
            calls = [_tool_call(i, name, {} if name == "specs" else {"code": self._code})
                     for i, name in enumerate(n for n in names if n != "submit")]
            return ModelTurn({"role": "assistant", "content": None, "tool_calls": calls}, finish_reason="tool_calls")
        return ModelTurn({"role": "assistant", "content": None,
                          "tool_calls": [_tool_call(99, "submit", {"code": self._code})]},
                         finish_reason="tool_calls")


class ReplayAgent:
    """Replays recorded assistant messages, one per turn."""

    def __init__(self, directory: str):
        root = Path(directory)
        folder = root / "transcripts" if (root / "transcripts").is_dir() else root
        if not folder.is_dir():
            raise UserError(f"replay: {directory} is not a run directory or a transcripts folder")
        self.name = f"replay:{directory}"
        self._transcripts: list[dict[str, Any]] = []
        for path in sorted(folder.glob("*.json")):
            try:
                self._transcripts.append(json.loads(path.read_text()))
            except ValueError as exc:
                raise UserError(f"replay: {path} is not valid JSON ({exc})") from exc
        if not self._transcripts:
            raise UserError(f"replay: no transcript (*.json) in {folder}")
        self._queue: list[dict[str, Any]] = []

    def start_episode(self, problem_id: str, attempt: int, context: dict[str, Any]) -> None:
        same = [t for t in self._transcripts if t.get("problem") == problem_id]
        chosen = next((t for t in same if t.get("attempt") == attempt), same[0] if same else None)
        messages = chosen.get("messages", []) if chosen else []
        self._queue = [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls")}
                       for m in messages if m.get("role") == "assistant"]

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> ModelTurn:
        if not self._queue:
            return ModelTurn({"role": "assistant", "content": "(the recorded transcript ends here)"}, gave_up=True)
        return ModelTurn(self._queue.pop(0), finish_reason="replay")


def builtin_agent(model: str) -> Any | None:
    """The built-in agent named by --model, or None for a real model."""
    if model == "oracle":
        return OracleAgent()
    if model == "oracle:tools":
        return OracleAgent(every_tool=True)
    if model.startswith("replay:"):
        return ReplayAgent(model.split(":", 1)[1])
    return None
