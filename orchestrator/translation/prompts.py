"""What the model is shown for a translation task.

The prompt holds: the A100 techniques (never the task title or summary, which name the
H100 reference's); the A100 source files (verbatim, from the pinned
artifact) and the list of headers they include, each marked as found in the pinned
include path or as a system/toolkit header; our adapter showing how the upstream code
is called; the entry-point header the candidate must implement; the build recipe
(arch sm_90a, flags, available include roots); the disclosed default shape. It never
contains the H100 reference's files or paths, nor the stress ranges.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from orchestrator.runner.shapes import default_shape
from orchestrator.translation.catalog import Task

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
MAX_SOURCE_CHARS = 400_000


def includes_of(text: str) -> list[tuple[str, str]]:
    """(kind, header) for every #include line: kind is 'quote' or 'angle'."""
    return [("quote" if q == '"' else "angle", h) for q, h in INCLUDE_RE.findall(text)]


def _search_dirs(task: Task, roots: Mapping[str, Path]) -> list[Path]:
    m = task.manifest
    entries = list(m["build"]["includes"]) + list(m["a100"].get("includes", []))
    return [roots[e["pin"]] / e["path"] for e in entries]


def header_table(task: Task, roots: Mapping[str, Path]) -> list[dict[str, str]]:
    """The headers the A100 sources include, and where each resolves."""
    side = task.manifest["a100"]
    root = roots[side["pin"]]
    dirs = _search_dirs(task, roots)
    seen: dict[str, dict[str, str]] = {}
    for rel in side["sources"]:
        src = root / rel
        for kind, header in includes_of(src.read_text(errors="replace")):
            if header in seen:
                continue
            beside = kind == "quote" and (src.parent / header).is_file()
            found = beside or any((d / header).is_file() for d in dirs)
            where = "pinned sources" if found else "system / CUDA toolkit"
            seen[header] = {"header": header, "resolves_to": where}
    return list(seen.values())


def prompt_parts(task: Task, roots: Mapping[str, Path]) -> dict[str, Any]:
    m = task.manifest
    side = m["a100"]
    root = roots[side["pin"]]
    pin = m["pins"][side["pin"]]
    files = []
    for rel in side["sources"]:
        text = (root / rel).read_text(errors="replace")
        if len(text) > MAX_SOURCE_CHARS:
            text = text[:MAX_SOURCE_CHARS] + "\n/* ... truncated ... */\n"
        files.append({"path": rel, "text": text})
    includes = [{"pin_package": m["pins"][e["pin"]]["package"], "path": e["path"]}
                for e in m["build"]["includes"]]
    return {
        # Only the A100 side is described: the title and summary name the H100 reference's techniques.
        "id": task.id, "a100_techniques": side.get("techniques", ""),
        "upstream": f"{pin['package']}=={pin['version']} ({pin['file']})",
        "a100_files": files,
        "headers": header_table(task, roots),
        "adapter": task.file(side["adapter"]).read_text() if side.get("adapter") else None,
        "entry_header": task.file(m["entry"]["header"]).read_text() if task.file(m["entry"]["header"]).is_file() else m["entry"]["signature"],
        "signature": m["entry"]["signature"],
        "shape": default_shape(m["shapes"], "cuda"),
        "dtype": m["dtype"],
        "build": {"std": m["build"]["std"], "flags": m["build"]["flags"], "arch": "sm_90a", "includes": includes},
    }


def render(parts: Mapping[str, Any]) -> str:
    """The prompt as Markdown."""
    out = [f"# Port an A100 kernel to H100 ({parts['id']})", "",
           "What it computes, and the exact memory layouts, are in the entry-point header below. "
           f"The A100 implementation uses: {parts['a100_techniques']}.", "",
           f"The A100 (sm_80) implementation below comes from {parts['upstream']}. Write a CUDA C++ file that "
           "implements the same computation for H100 (sm_90a) as fast as you can: use what Hopper adds "
           "(wgmma, TMA, thread-block clusters, asynchronous pipelines, warp specialization) where it pays.", "",
           "## What to submit", "",
           "One `.cu` file that defines this function (the header below is force-included when it is built):", "",
           "```cpp", parts["entry_header"].rstrip(), "```", "",
           f"It is built as `nvcc -shared -Xcompiler -fPIC -std={parts['build']['std']} "
           f"{' '.join(parts['build']['flags'])} -gencode arch=compute_90a,code=sm_90a` with these include "
           "directories from the pinned upstream packages: "
           + ", ".join(f"`{i['pin_package']}:{i['path']}`" for i in parts["build"]["includes"]) + ".", "",
           "Correctness is checked on hidden, randomized shapes (within the kernel's documented alignment "
           "rules), not only on the disclosed one; speed is measured against the human-written H100 kernel "
           "of the same project.", "",
           f"## Disclosed shape\n\n`{json.dumps(parts['shape'])}` ({parts['dtype']})", ""]
    if parts.get("adapter"):
        out += ["## How the harness calls the A100 code (our adapter)", "", "```cpp", parts["adapter"].rstrip(), "```", ""]
    out += ["## Headers the A100 sources include", ""]
    out += [f"- `{h['header']}` ({h['resolves_to']})" for h in parts["headers"]]
    out += [""]
    for f in parts["a100_files"]:
        out += [f"## A100 source: `{f['path']}`", "", "```cpp", f["text"].rstrip(), "```", ""]
    return "\n".join(out)


def build_prompt(task: Task, roots: Mapping[str, Path]) -> str:
    return render(prompt_parts(task, roots))
