"""A translation candidate must port the A100 kernel, not hand back the H100 reference.

The pinned sources of both sides sit on the candidate's include path (CUTLASS, CuTe and
the project's own headers are fair game), so two shortcuts need closing:
- including the H100 reference itself (directly or through another header): found from
  nvcc's dependency list (`-M`) of the candidate, compared with the H100 side's sources;
- pasting it: the share of the H100 sources' distinctive lines (long enough to mean
  something, absent from the A100 sources the model was given) that appear verbatim in
  the candidate.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Mapping

from orchestrator.translation import builds
from orchestrator.translation.catalog import Task

PASTED_SHARE = 0.5     # of the H100 reference's distinctive lines
MIN_LINE_CHARS = 24    # shorter lines (braces, `return;`, common idioms) prove nothing
MIN_DISTINCTIVE = 20   # too few distinctive lines: no verdict from pasting


def side_files(task: Task, roots: Mapping[str, Path], side: str) -> list[Path]:
    spec = task.manifest[side]
    names = list(dict.fromkeys([spec["main"], *spec.get("sources", [])]))
    return [(roots[spec["pin"]] / name).resolve() for name in names]


def included_files(task: Task, roots: Mapping[str, Path], candidate: Path, timeout_s: float = 600) -> list[Path]:
    """Every file the candidate's translation unit includes, by nvcc's preprocessor."""
    cmd = builds.command(task, "candidate", roots, candidate, Path("/dev/null"))
    cmd = [c for c in cmd[:-3] if c != "-shared"] + ["-M", str(candidate)]  # drop "source -o output"
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        return []  # the build itself reports the error
    deps = res.stdout.replace("\\\n", " ").split(":", 1)[-1].split()
    return [Path(d).resolve() for d in deps]


def _distinctive(lines: set[str]) -> set[str]:
    return {ln for ln in lines if len(ln) >= MIN_LINE_CHARS and not ln.startswith(("//", "*", "/*", "#include"))}


def _lines(paths: list[Path]) -> set[str]:
    out: set[str] = set()
    for p in paths:
        if p.is_file():
            out |= {" ".join(ln.split()) for ln in p.read_text(errors="replace").splitlines()}
    return out


def reference_leak(task: Task, roots: Mapping[str, Path], candidate: Path) -> str | None:
    """Why the candidate is the H100 reference in disguise, or None."""
    h100 = side_files(task, roots, "h100")
    a100 = set(side_files(task, roots, "a100"))
    forbidden = [p for p in h100 if p not in a100]
    hit = sorted(set(included_files(task, roots, candidate)) & set(forbidden))
    if hit:
        return f"reference_include: the candidate includes the H100 reference {hit[0].name}"
    reference = _distinctive(_lines(forbidden)) - _lines(sorted(a100))
    if len(reference) >= MIN_DISTINCTIVE:
        share = len(reference & _lines([candidate])) / len(reference)
        if share >= PASTED_SHARE:
            return (f"reference_pasted: {share:.0%} of the H100 reference's distinctive lines appear verbatim "
                    "in the candidate")
    return None
