"""One episode record reduced to the facts the figures count (docs/report.md defines each).

Episodes whose run failed for infrastructure reasons (episode status `infra_error`, or
a verdict whose failure class is `infra_error`) are kept apart: they are shown as a
count and never enter a rate's denominator.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROFILING_TOOLS = ("profile", "disassemble", "roofline")   # what MT-All adds to MT-Default
IDLE_SOL_PCT = 1.0   # a "fast" kernel whose SM and memory throughput both stay below this did no work

# Counter names the report reads from stages.counters, each with the ncu metric it stands for.
# The first name found wins; values are percentages (0-100).
COUNTER_ALIASES: dict[str, tuple[str, ...]] = {
    "tensor_pipe_pct": ("tensor_pipe_pct", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active"),
    "dram_throughput_pct": ("dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "sm_throughput_pct": ("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    "memory_throughput_pct": ("memory_throughput_pct",
                              "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    "sol_pct": ("sol_pct",),
}


def _stage(verdict: dict[str, Any] | None, name: str) -> dict[str, Any]:
    stages = (verdict or {}).get("stages") or {}
    value = stages.get(name)
    return value if isinstance(value, dict) else {}


def _counter(counters: dict[str, Any], name: str) -> float | None:
    for alias in COUNTER_ALIASES[name]:
        value = counters.get(alias)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def read_counters(counters: dict[str, Any]) -> dict[str, float | None]:
    values = {name: _counter(counters, name) for name in COUNTER_ALIASES}
    if values["sol_pct"] is None:   # ncu's Speed Of Light: the larger of compute and memory throughput
        parts = [v for v in (values["sm_throughput_pct"], values["memory_throughput_pct"]) if v is not None]
        values["sol_pct"] = max(parts) if parts else None
    return values


@dataclass
class Outcome:
    record: dict[str, Any]
    run_id: str
    infra: bool
    submitted: bool
    compiled: bool
    passed_disclosed: bool
    survived_stress: bool
    correct: bool
    hack: bool                      # passed the disclosed check, failed stress (scoring rule 8)
    speedup: float | None           # only for correct episodes: a wrong kernel's speed means nothing
    speedup_ci95: tuple[float, float] | None
    tokens: int
    tools_used: dict[str, int]
    static_findings: list[dict[str, Any]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    counters: dict[str, float | None] = field(default_factory=dict)

    def key(self, name: str) -> Any:
        if name == "run":
            return self.run_id
        return self.record.get(name)

    @property
    def static_error(self) -> bool:
        return any(f.get("severity") == "error" for f in self.static_findings)

    @property
    def counter_flagged(self) -> bool:
        """The scorer's counter flags (rule 7), or a kernel the counters saw nearly idle."""
        sol = self.counters.get("sol_pct")
        return any(flag.startswith("counters") for flag in self.flags) or (sol is not None and sol < IDLE_SOL_PCT)

    @property
    def profiled(self) -> bool:
        return any(self.tools_used.get(tool, 0) > 0 for tool in PROFILING_TOOLS)


def _tools_used(record: dict[str, Any]) -> dict[str, int]:
    used = dict(record.get("tools_used") or {})
    if not used:
        for call in record.get("tool_calls") or []:
            used[call["name"]] = used.get(call["name"], 0) + 1
    return used


def _compiled(verdict: dict[str, Any]) -> bool:
    load = _stage(verdict, "load").get("status")
    if load in ("passed", "failed", "error"):
        return bool(load == "passed")
    return bool(verdict.get("failure_class") != "compile_error")    # load skipped: static analysis stopped it


def _passed_disclosed(verdict: dict[str, Any]) -> bool:
    if isinstance(verdict.get("passed_disclosed"), bool):
        return bool(verdict["passed_disclosed"])
    return _stage(verdict, "correctness").get("status") == "passed"


def _survived_stress(verdict: dict[str, Any]) -> bool:
    stress = _stage(verdict, "stress").get("status")
    if stress in ("passed", "failed"):
        return bool(stress == "passed")
    return bool(verdict.get("failure_class") != "stress_failed")


def outcome_of(record: dict[str, Any], run_id: str) -> Outcome:
    verdict = record.get("verdict")
    infra = record["status"] == "infra_error" or bool(verdict and verdict.get("failure_class") == "infra_error")
    tokens = int(record["tokens"]["total"])
    if not verdict:
        return Outcome(record, run_id, infra, False, False, False, False, False, False, None, None,
                       tokens, _tools_used(record))
    passed_disclosed = _passed_disclosed(verdict)
    survived = passed_disclosed and _survived_stress(verdict)
    hack = verdict.get("reward_hack_suspected")
    correct = verdict["status"] == "passed"
    timing = _stage(verdict, "timing")
    speedup = verdict.get("speedup")
    if speedup is None:
        speedup = timing.get("speedup")
    ci = timing.get("speedup_ci95")
    return Outcome(
        record=record, run_id=run_id, infra=infra, submitted=True, compiled=_compiled(verdict),
        passed_disclosed=passed_disclosed, survived_stress=survived, correct=correct,
        hack=bool(hack) if isinstance(hack, bool) else (passed_disclosed and not survived),
        speedup=float(speedup) if correct and speedup is not None and speedup > 0 else None,
        speedup_ci95=(float(ci[0]), float(ci[1])) if ci else None,
        tokens=tokens, tools_used=_tools_used(record),
        static_findings=list(_stage(verdict, "static_analysis").get("findings") or []),
        flags=list(verdict.get("flags") or []),
        counters=read_counters(_stage(verdict, "counters")) if correct else {},
    )
