"""The candidate's process: imports the submission and runs what the judge asks.

Started by the judge with multiprocessing's spawn context (a fresh interpreter that
inherits none of the judge's memory: no seed, no nonce, no reference outputs). Its
stdout and stderr go to a log file, never to the judge's result channel. Messages
are pickles of plain data and tensors over a private pipe (orchestrator/runner/wire.py;
tensors are copied, not shared). After a call it
reports a keyed digest of its inputs, not the inputs, for the judge's mutation check.

Checks that need the candidate's own address space live here and report flags to the
judge: timer functions replaced, an output aliasing an input, an output object
returned twice (memoisation), a thread still alive after forward() returned, an
output that changes after forward() returned (work left on a side stream or thread).
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Any

# Bound before the submission is imported (see timing.TimerGuard).
from orchestrator.runner import timing, wire
from orchestrator.runner.problem import import_file, to_device, tree_digest

import torch

MAX_ERROR_CHARS = 4000


def _send(conn: Any, obj: Any) -> None:
    wire.send(conn, obj)


def _recv(conn: Any) -> Any:
    return wire.recv(conn)


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[0] != a[1] and b[0] != b[1]


def _same(a: Any, b: Any) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return len(ta) == len(tb) and all(
        x.shape == y.shape and bool(torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))) for x, y in zip(ta, tb))


class Server:
    def __init__(self, device: str):
        self.device = device
        self.guard = timing.TimerGuard()
        self.model_cls: Any = None
        self.models: dict[str, torch.nn.Module] = {}
        self.previous_outputs: list[Any] = []
        self.previous_inputs: tuple[Any, ...] | None = None
        self.timing_sets: dict[str, Any] = {}  # the judge ships timing inputs with its first round only

    def flags_after_call(self) -> list[str]:
        return [f"timer_tampered:{name}" for name in self.guard.tampered()]

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        module = import_file(msg["solution"], "popcorn_candidate")
        cls = getattr(module, "ModelNew", None)
        if cls is None or not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            return {"ok": False, "kind": "compile_error",
                    "error": "the submission defines no class ModelNew(torch.nn.Module)"}
        self.model_cls = cls
        return {"ok": True, "flags": self.flags_after_call()}

    def build(self, msg: dict[str, Any]) -> dict[str, Any]:
        init = to_device(msg["init"], self.device)
        self.models[msg["key"]] = self.model_cls(**init).to(self.device).eval()
        return {"ok": True, "flags": self.flags_after_call()}

    def _poison(self, nbytes: int) -> None:
        # Fill the caching allocator's free blocks with NaN so an unwritten output shows.
        if self.device.startswith("cuda"):
            junk = torch.full((max(nbytes, 1 << 20) // 4,), float("nan"), device=self.device)
            del junk

    def _inputs_for(self, msg: dict[str, Any]) -> tuple[Any, ...]:
        inputs = to_device(tuple(msg["inputs"]), self.device)
        prev = self.previous_inputs
        if msg.get("reuse_buffers") and prev is not None:
            # Same addresses, new values: a cache keyed by pointer returns stale output.
            merged = []
            for new, old in zip(inputs, prev):
                if isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor) \
                        and new.shape == old.shape and new.dtype == old.dtype:
                    old.copy_(new)
                    merged.append(old)
                else:
                    merged.append(new)
            inputs = tuple(merged)
        return inputs

    def forward(self, msg: dict[str, Any]) -> dict[str, Any]:
        model = self.models[msg["key"]]
        inputs = self._inputs_for(msg)
        self._poison(sum(t.numel() * t.element_size() for t in _tensors(inputs)))
        py_threads = set(threading.enumerate())
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model(*inputs)
        snapshot = [t.clone() for t in _tensors(out)]  # stream-ordered, no synchronize
        late_threads = [t for t in threading.enumerate() if t not in py_threads and t.is_alive()]
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        flags = self.flags_after_call()
        if late_threads:
            flags.append(f"thread_alive_after_return:{late_threads[0].name}")
            for t in late_threads:
                t.join(timeout=5)
        if not _same(snapshot, out):
            flags.append("output_changed_after_return")
        in_ranges = [_storage_range(t) for t in _tensors(inputs)]
        if any(_overlaps(_storage_range(o), r) for o in _tensors(out) for r in in_ranges):
            flags.append("output_aliases_input")
        out_ptrs = {o.untyped_storage().data_ptr() for o in _tensors(out) if o.numel()}
        if any(o.untyped_storage().data_ptr() in out_ptrs
               for prev in self.previous_outputs for o in _tensors(prev) if o.numel()):
            flags.append("output_reused_across_calls")
        self.previous_outputs = (self.previous_outputs + [out])[-4:]
        self.previous_inputs = inputs
        reply: dict[str, Any] = {"ok": True, "output": to_device(out, "cpu"), "flags": flags, "wall_s": wall}
        if msg.get("digest_key"):
            reply["inputs_digest"] = tree_digest(inputs, msg["digest_key"])
        return reply

    def time(self, msg: dict[str, Any]) -> dict[str, Any]:
        model = self.models[msg["key"]]
        sets = timing.cached_sets(self.timing_sets, msg, lambda sets: [to_device(tuple(s), self.device) for s in sets])
        prints: list[tuple[int, Any]] = []
        py_threads = set(threading.enumerate())

        def check(k: int, out: Any) -> None:
            prints.append((k, timing.fingerprint(out)))

        with torch.no_grad():
            result = timing.time_calls(model, sets, self.device, msg["iters"], msg["warmup"],
                                       msg["hold_bytes"], on_output=check,
                                       max_calls_per_region=int(msg.get("max_calls_per_region",
                                                                        timing.MAX_CALLS_PER_REGION)),
                                       calls=int(msg.get("calls_per_region", 0)))
        flags = self.flags_after_call()
        if result["reused_output_storage"]:
            flags.append("output_reused_across_calls")
        if [t for t in threading.enumerate() if t not in py_threads and t.is_alive()]:
            flags.append("thread_alive_after_return:timing")
        return {"ok": True, "timing": result, "fingerprints": prints, "flags": flags}


_RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))


def _format_error(exc: BaseException) -> str:
    """The traceback without the harness's own frames (they say nothing to the model)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_RUNNER_DIR)]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def _is_compile_failure(op: str, exc: BaseException) -> bool:
    if op in ("load", "build"):
        return True
    name, module = type(exc).__name__, type(exc).__module__ or ""
    return "Compilation" in name or module.startswith("triton.compiler") or "Error building extension" in str(exc)


def _release_cached_memory(msg: dict[str, Any]) -> dict[str, Any]:
    """Give this process's cached, unused GPU memory back to the driver: other evaluations'
    trials share the GPU (the judge asks after each trial when they may)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return {"ok": True}


def serve(conn: Any, device: str, log_path: str) -> None:
    """Entry point of the candidate process (multiprocessing target)."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    else:
        torch.ones(1 << 16).sum()  # start torch's CPU thread pool before anything is watched
    server = Server(device)
    handlers = {"load": server.load, "build": server.build, "forward": server.forward, "time": server.time,
                "release": _release_cached_memory, "ready": lambda msg: {"ok": True}}
    while True:
        try:
            msg = _recv(conn)
        except (EOFError, OSError):
            return
        if msg["op"] == "exit":
            return
        try:
            reply = handlers[msg["op"]](msg)
        except SyntaxError as exc:
            reply = {"ok": False, "kind": "compile_error", "error": f"{type(exc).__name__}: {exc}"}
        except BaseException as exc:  # the candidate's failure is data for the judge
            kind = "compile_error" if _is_compile_failure(msg["op"], exc) else "runtime_error"
            text = _format_error(exc)
            reply = {"ok": False, "kind": kind, "error": text[-MAX_ERROR_CHARS:]}
        try:
            _send(conn, reply)
        except Exception as exc:  # an unpicklable output, for instance
            _send(conn, {"ok": False, "kind": "runtime_error", "error": f"cannot return the result: {exc}"})
