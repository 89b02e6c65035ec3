"""The process that runs one built library (A100 baseline, H100 reference or candidate).

On a CPU device (the harness's own tests, with host-compiled stand-in libraries) the
same protocol runs with host pointers and a NULL stream.

Started by the translation judge with multiprocessing's spawn context: a fresh
interpreter with none of the judge's memory (no seed, nonce or reference outputs).
Its stdout and stderr go to a log file. It loads the task's glue (task.py: inputs
layout and the `launch` call) and the library through ctypes, then answers pickled
requests on a private pipe:

    {"op": "run", "inputs": (cpu tensors...), "outputs": (indices written)}
                                                -> {"ok", "output", "mutated_inputs"}
    {"op": "time", "input_sets": [...] (first round only), "iters", "warmup", "hold_bytes"}
                                                -> {"ok", "timing", "fingerprints"}
    {"op": "exit"}

A task whose glue defines `prepare(library, inputs, stream) -> inputs` (a ctypes handle of the
library, the inputs on the device) gets it called once per input set, outside the timed
region: the one-time weight preparation a deployment does at load time (vLLM prepacks
quantized weights once). It returns what `launch` takes (typically the inputs plus a buffer
the library's own prepare function filled). The mutation check covers the task's inputs,
before and after both calls; timing copies the prepared set afresh for every iteration.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import sys
import traceback
from typing import Any

# Bound before the library is loaded (see timing.TimerGuard).
from orchestrator.runner import timing, wire
from orchestrator.runner.problem import import_file, to_device

import torch

MAX_ERROR_CHARS = 4000


def _send(conn: Any, obj: Any) -> None:
    try:
        wire.send(conn, obj)
    except pickle.PicklingError as exc:  # refused here, so that a refusal in the judge means a forged message
        wire.send(conn, {"ok": False, "kind": "runtime_error", "error": f"cannot return the result: {exc}"})


def load_entry(library: str | ctypes.CDLL, symbol: str, argtypes: list[Any]) -> Any:
    lib = library if isinstance(library, ctypes.CDLL) else ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)
    entry = getattr(lib, symbol)
    entry.argtypes = argtypes
    entry.restype = ctypes.c_int
    return entry


def serve(conn: Any, task_dir: str, library: str, symbol: str, device: str, log_path: str) -> None:
    log = open(log_path, "ab", buffering=0)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    guard = timing.TimerGuard()
    try:
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
        glue = import_file(os.path.join(task_dir, "task.py"), "popcorn_translation_task")
        handle = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)  # also what glue.prepare calls into
        entry = load_entry(handle, symbol, glue.ARGTYPES)
    except BaseException as exc:  # a library that does not load is the submission's failure
        _send(conn, {"ok": False, "kind": "runtime_error", "error": _describe(exc)})
        return
    _send(conn, {"ok": True})

    cuda = device.startswith("cuda")

    def stream() -> int:
        # On a CPU (tests with host-compiled libraries) there is no stream: NULL is passed.
        return torch.cuda.current_stream().cuda_stream if cuda else 0

    def call(*inputs: Any) -> Any:
        return glue.launch(entry, inputs, stream())

    def prepare(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if not hasattr(glue, "prepare"):
            return inputs
        prepared = tuple(glue.prepare(handle, inputs, stream()))
        if cuda:
            torch.cuda.synchronize()
        return prepared

    timing_sets: dict[str, Any] = {}
    while True:
        try:
            msg = wire.recv(conn)
        except (EOFError, OSError):
            return
        if msg["op"] == "exit":
            return
        try:
            reply = _handle(msg, call, prepare, device, timing_sets)
        except BaseException as exc:
            reply = {"ok": False, "kind": "runtime_error", "error": _describe(exc)}
        tampered = guard.tampered()
        if tampered:
            reply = {"ok": False, "kind": "hack_detected", "error": f"timer_tampered: {', '.join(tampered)}"}
        _send(conn, reply)


def _handle(msg: dict[str, Any], call: Any, prepare: Any, device: str, cache: dict[str, Any]) -> dict[str, Any]:
    if msg["op"] == "run":
        inputs = to_device(msg["inputs"], device)
        read_only = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and i not in msg.get("outputs", ())]
        before = {i: inputs[i].clone() for i in read_only}
        out = call(*prepare(inputs))
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        # Compared here, on the device: shipping multi-GB inputs back to the judge costs more than the trial.
        mutated = [i for i in read_only if not torch.equal(torch.nan_to_num(before[i]), torch.nan_to_num(inputs[i]))]
        return {"ok": True, "output": to_device(out, "cpu"), "mutated_inputs": mutated}
    if msg["op"] == "time":  # sets prepared untimed, once per timing (later rounds reuse them)
        sets = timing.cached_sets(cache, msg, lambda sets: [prepare(to_device(s, device)) for s in sets])
        prints: list[tuple[int, Any]] = []
        result = timing.time_calls(call, sets, device, int(msg["iters"]), int(msg["warmup"]), int(msg["hold_bytes"]),
                                   on_output=lambda k, out: prints.append((k, timing.fingerprint(out))),
                                   max_calls_per_region=int(msg.get("max_calls_per_region",
                                                                    timing.MAX_CALLS_PER_REGION)),
                                   calls=int(msg.get("calls_per_region", 0)))
        return {"ok": True, "timing": result, "fingerprints": prints}
    raise ValueError(f"unknown op {msg['op']!r}")


def _describe(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-MAX_ERROR_CHARS:]


if __name__ == "__main__":  # pragma: no cover - started through multiprocessing only
    sys.exit("start this module through the translation judge")
