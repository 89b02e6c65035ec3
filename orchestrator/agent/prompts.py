"""The prompt of an episode: the problem statement, the submission contract, the device.

What is disclosed (docs/agent.md explains why):
- the reference source (reference.py) verbatim, the summary, dtype and tolerance;
- ONE shape: the manifest's default (the H200 shape), or `cpu_default` when the run
  scores on a CPU; this is the shape `check` and `compile` use;
- the manifest's constraints (e.g. `n_rows * avg_degree <= 2**27`), which bound every
  shape and tell the model, for instance, that 32-bit indexing suffices;
- NOT the parameter ranges nor any hidden shape: the model is told that scoring runs
  hidden shapes of other sizes (odd, non-power-of-two, boundary) and must stay general.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from orchestrator.agent.tools import HARNESS_TOOLS

SYSTEM_PROMPT = """You are an expert GPU kernel engineer. You are given a PyTorch reference \
implementation (class Model) and you write a faster implementation of exactly the same computation.

Submission contract:
- One Python file defining `class ModelNew(torch.nn.Module)` whose constructor takes the same \
keyword arguments as Model's and whose forward takes the same inputs and returns the same \
outputs (same shapes, dtypes and order).
- Write custom kernels with Triton (`import triton`, `import triton.language as tl`) or with CUDA \
C++ through `torch.utils.cpp_extension.load_inline`. Plain PyTorch glue (allocation, views) is \
fine; calling the library operations the problem forbids, calling the reference, or falling back \
to it is not.
- Your code is scored on the disclosed shape AND on hidden shapes of other sizes (including odd, \
non-power-of-two and boundary sizes) within the stated constraints: never hard-code sizes.
- Inputs are fresh on every call; do not cache outputs across calls, do not use side streams \
without synchronizing, do not touch timers.
- Outputs must meet the stated tolerance against the reference on every shape. Speed is measured \
only for correct submissions, against the reference."""

ST_INSTRUCTIONS = """You have exactly one turn. Answer with a single call to the `submit` tool \
whose `code` argument is the complete Python file."""

MT_INSTRUCTIONS = """You work in turns; each turn you may call tools. Tools: {tools}. \
Each code-taking tool accepts the complete file as `code` (omit it to reuse your previous code). \
`check` tests correctness at the disclosed shape only. Call `submit` with your final code to end; \
you have at most {turns} turns, and only submitted code is scored."""


def disclosed_shape(manifest: Mapping[str, Any], device: str) -> dict[str, Any]:
    from orchestrator.runner.shapes import default_shape

    return default_shape(manifest["shapes"], device)


def tolerance_text(tolerance: Mapping[str, Any]) -> str:
    metric = tolerance.get("metric", "allclose")
    keys = [k for k in ("atol", "rtol", "rel_norm", "fraction", "rel_norm_max") if k in tolerance]
    values = ", ".join(f"{k}={tolerance[k]}" for k in keys)
    text = f"{metric} ({values})" if values else str(metric)
    if metric == "allclose":
        text += ": |out - ref| <= atol + rtol * max(|ref|, scale) elementwise"
    if "rel_norm_max" in tolerance or metric != "exact":
        text += f"; and ||out - ref|| / ||ref|| <= {tolerance.get('rel_norm_max', 1e-2)}"
    return text


def device_text(device_info: Mapping[str, Any]) -> str:
    if device_info.get("type") == "cuda":
        parts = [str(device_info.get("name", "CUDA GPU"))]
        if device_info.get("sms"):
            parts.append(f"{device_info['sms']} SMs")
        if device_info.get("memory_gib"):
            parts.append(f"{device_info['memory_gib']:.0f} GiB")
        if device_info.get("compute_capability"):
            parts.append(f"compute capability {device_info['compute_capability']}")
        return ", ".join(parts)
    return ("CPU only (a functional run: Triton kernels run in the Triton interpreter, "
            "TRITON_INTERPRET=1; CUDA C++ cannot be built)")


def host_device_info(device: str, gpus: list[int]) -> dict[str, Any]:
    """What the host sees of the scoring device, for the prompt (never secrets)."""
    if device != "cuda":
        return {"type": "cpu"}
    import torch

    index = gpus[0] if gpus else 0
    if not torch.cuda.is_available():  # the GPU is only visible inside the sandbox images
        return {"type": "cuda", "name": "NVIDIA GPU (call specs for details)"}
    p = torch.cuda.get_device_properties(index)
    return {"type": "cuda", "name": p.name, "sms": p.multi_processor_count,
            "memory_gib": p.total_memory / 2**30, "compute_capability": f"{p.major}.{p.minor}"}


def problem_prompt(entry: Any, device: str, device_info: Mapping[str, Any]) -> str:
    manifest = dict(entry.manifest)
    shape = disclosed_shape(manifest, device)
    reference = (Path(entry.path) / "reference.py").read_text()
    lines = [f"# Problem {manifest['id']}: {manifest.get('title', '')}", ""]
    if manifest.get("summary"):
        lines += [manifest["summary"], ""]
    lines += ["## Reference (reference.py)", "```python", reference.rstrip(), "```", "",
              "`get_init_inputs(shape)` gives Model's (and ModelNew's) keyword arguments; "
              "`get_inputs(shape, generator, device)` gives forward's inputs.", "",
              "## Shapes",
              f"Disclosed shape (used by compile and check): `{json.dumps(shape)}`."]
    constraints = manifest.get("constraints") or []
    if constraints:
        lines.append("Every shape, hidden ones included, satisfies: " + "; ".join(f"`{c}`" for c in constraints) + ".")
    lines += ["Hidden shapes of other sizes are scored too; your code must not depend on the disclosed one.", "",
              "## Numerics",
              f"dtype: {manifest.get('dtype', 'see reference')}",
              f"tolerance: {tolerance_text(manifest.get('tolerance') or {})}"]
    forbidden = manifest.get("forbidden_calls") or []
    if forbidden:
        lines.append("Forbidden in your code (static analysis rejects it): " + ", ".join(f"`{c}`" for c in forbidden))
    lines += ["", "## Device", device_text(device_info)]
    return "\n".join(lines)


def harness_instructions(harness: str, max_turns: int) -> str:
    if harness == "st":
        return ST_INSTRUCTIONS
    return MT_INSTRUCTIONS.format(tools=", ".join(HARNESS_TOOLS[harness]), turns=max_turns)


TRANSLATION_SYSTEM_PROMPT = """You are an expert CUDA engineer who ports production kernels from \
A100 (sm_80) to H100 (sm_90a). You submit one CUDA C++ file that implements the given entry point; \
it is checked on hidden shapes and timed against the human-written H100 kernel."""

TRANSLATION_NOTE = """For this task `code` is the complete `.cu` file (not Python); the tools that \
run Python kernels (profile, disassemble, roofline) and the Python static analyzer do not apply."""


def is_translation(entry: Any) -> bool:
    kind = getattr(entry, "kind", None)
    if kind is not None:
        return bool(kind == "translation")
    manifest = entry.manifest
    return str(manifest.get("id", "")).startswith("tr-") or "entry" in manifest and "a100" in manifest


def translation_prompt(entry: Any, settings: Any) -> str:
    from orchestrator.translation import prompts as tr_prompts, sources
    from orchestrator.translation.catalog import find_task

    task = find_task(entry.id, settings.translation_dir)
    roots = sources.prepare(task.manifest, settings.cache_dir, [], offline=False)
    return tr_prompts.build_prompt(task, roots)


def initial_messages(entry: Any, harness: str, max_turns: int, device: str,
                     device_info: Mapping[str, Any], settings: Any = None) -> list[dict[str, Any]]:
    how = "\n\n## How to answer\n" + harness_instructions(harness, max_turns)
    if is_translation(entry):
        user = translation_prompt(entry, settings) + how + "\n" + TRANSLATION_NOTE
        return [{"role": "system", "content": TRANSLATION_SYSTEM_PROMPT}, {"role": "user", "content": user}]
    user = problem_prompt(entry, device, device_info) + how
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


NUDGE_TOOL = "Please answer with a tool call. When you are done, call `submit` with your complete code."
LAST_TURN = "This is your last turn: call `submit` with your complete code now."
