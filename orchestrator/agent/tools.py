"""The eight tools a model can call, as JSON-schema functions, and their implementations.

| tool | what it does | where it runs |
|---|---|---|
| compile | import the candidate, build its kernels at the disclosed shape | episode sandbox (scoring pipeline, mode="compile") |
| check | correctness at the disclosed shape only | episode sandbox (scoring pipeline, mode="check") |
| specs | GPU name, SMs, memory, caches, vendor peaks, measured ceilings | episode sandbox (probe) |
| static_analysis | the scoring analyzer's findings, as warnings | host (parses the source, never runs it) |
| submit | ends the episode; scoring then runs in a fresh sandbox | - |
| profile | ncu at the disclosed shape: SOL, DRAM, occupancy, warp stalls, tensor pipe | episode sandbox |
| disassemble | SASS and PTX of the candidate's compiled kernels | episode sandbox |
| roofline | measured ceilings (cached per GPU) and the kernel's position | episode sandbox |

Every code-taking tool accepts `code` (the whole submission file); omitted, the code of
the previous call is reused. A tool failure the model caused (bad arguments, compile
error, wrong output) is an ordinary tool result with ok=False; a sandbox failure raises
and ends the episode as infra_error. Outputs longer than the limit are trimmed with a note.
"""
from __future__ import annotations

import csv
import io
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from orchestrator.agent.client import parse_arguments
from orchestrator.errors import InfraError
from orchestrator.sandbox.gpu_holds import measuring
from orchestrator.scoring.counters import SESSION_REFUSED

DEFAULT_OUTPUT_LIMIT = 12_000  # characters of one tool result sent to the model
PROBE_PREFIX = "POPCORN_PROBE "
PROBE_DIR = ".probe"
REPO_ORCHESTRATOR = Path(__file__).resolve().parent.parent

HARNESS_TOOLS: dict[str, tuple[str, ...]] = {
    "st": ("submit",),
    "mt-default": ("compile", "check", "specs", "static_analysis", "submit"),
    "mt-all": ("compile", "check", "specs", "static_analysis", "profile", "disassemble", "roofline", "submit"),
}

# Dense vendor peaks (datasheets) by name fragment; measured ceilings come from `roofline`.
VENDOR_PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H200", {"dram_tbps": 4.8, "fp32_tflops": 67.0, "tf32_tflops": 494.7, "bf16_tflops": 989.4, "fp8_tflops": 1978.9}),
    ("H100 PCIe", {"dram_tbps": 2.0, "fp32_tflops": 51.2, "tf32_tflops": 378.0, "bf16_tflops": 756.0, "fp8_tflops": 1513.0}),
    ("H100", {"dram_tbps": 3.35, "fp32_tflops": 67.0, "tf32_tflops": 494.7, "bf16_tflops": 989.4, "fp8_tflops": 1978.9}),
    ("A100", {"dram_tbps": 2.039, "fp32_tflops": 19.5, "tf32_tflops": 156.0, "bf16_tflops": 312.0}),
)


@dataclass
class ToolResult:
    text: str
    ok: bool = True
    ends_episode: bool = False
    data: dict[str, Any] = field(default_factory=dict)   # kept in the transcript, not sent


class ToolArgumentError(ValueError):
    """The model's arguments do not fit the tool: goes back to the model."""


def trim(text: str, limit: int = DEFAULT_OUTPUT_LIMIT) -> tuple[str, bool]:
    """Keep the head and the tail of a long output, with a note of what was cut."""
    if len(text) <= limit:
        return text, False
    head, tail = (limit * 2) // 3, limit // 3
    cut = len(text) - head - tail
    note = f"\n[... {cut} of {len(text)} characters trimmed; the start and the end are shown ...]\n"
    return text[:head] + note + text[-tail:], True


# ---------------------------------------------------------------- JSON-schema specs

_CODE = {"type": "string", "description": "The complete Python source of your submission file "
         "(defines class ModelNew). Omit it to reuse the code of your previous tool call."}

TOOL_SPECS: dict[str, dict[str, Any]] = {
    "submit": {
        "description": "Submit your final solution and end the episode. It is then scored in a fresh "
                       "sandbox: correctness at the disclosed shape, correctness on hidden shapes, speed.",
        "parameters": {"type": "object", "properties": {"code": _CODE}, "required": ["code"]},
    },
    "compile": {
        "description": "Import your code and build its kernels (Triton JIT / load_inline) at the disclosed "
                       "shape. Returns compiler errors, if any.",
        "parameters": {"type": "object", "properties": {"code": _CODE}},
    },
    "check": {
        "description": "Run your code against the reference at the disclosed shape (fresh random inputs, "
                       "several trials) and report mismatches. Hidden shapes are not checked here.",
        "parameters": {"type": "object", "properties": {"code": _CODE}},
    },
    "specs": {
        "description": "The device: name, SM count, memory, caches, vendor peak throughput, and measured "
                       "ceilings if they were measured already.",
        "parameters": {"type": "object", "properties": {}},
    },
    "static_analysis": {
        "description": "Run the scoring's static analyzer on your code (forbidden library calls, fallbacks, "
                       "timer or stream tricks, hard-coded shapes). At scoring, error findings reject the submission.",
        "parameters": {"type": "object", "properties": {"code": _CODE}},
    },
    "profile": {
        "description": "Profile your kernels with Nsight Compute at the disclosed shape: duration, speed of "
                       "light (SM and memory), DRAM throughput, occupancy, warp-stall breakdown, tensor-pipe use.",
        "parameters": {"type": "object", "properties": {
            "code": _CODE,
            "kernel": {"type": "string", "description": "only kernels whose name contains this text"}}},
    },
    "disassemble": {
        "description": "SASS and PTX of your compiled kernels (filtered: instructions only).",
        "parameters": {"type": "object", "properties": {
            "code": _CODE,
            "kernel": {"type": "string", "description": "only kernels whose name contains this text"},
            "what": {"type": "string", "enum": ["sass", "ptx", "both"], "description": "default: sass"}}},
    },
    "roofline": {
        "description": "Measured ceilings of this device (DRAM and L2 bandwidth, FP32 and tensor peaks) and "
                       "your kernel's position: time at the disclosed shape, FLOP and bytes from the problem's "
                       "formulas, arithmetic intensity, fraction of the attainable roofline.",
        "parameters": {"type": "object", "properties": {"code": _CODE}},
    },
}


def tool_schemas(harness: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, **TOOL_SPECS[name]}}
            for name in HARNESS_TOOLS[harness]]


# ---------------------------------------------------------------- the episode's workspace

@dataclass
class Scoring:
    """The scoring entry points the tools use; real ones by default (tests of the loop
    logic may pass small fakes)."""

    evaluate: Callable[..., dict[str, Any]]
    analyze: Callable[[str, dict[str, Any]], list[Any]]

    @classmethod
    def real(cls) -> "Scoring":
        from orchestrator.scoring import pipeline, static_analysis

        return cls(evaluate=pipeline.evaluate, analyze=static_analysis.analyze)


@dataclass
class Workspace:
    """What the tools of one episode share: the problem, the sandbox, the last code."""

    entry: Any                                  # catalog Entry (id, path, manifest, ...)
    settings: Any                               # orchestrator.config.Settings
    scoring: Scoring
    device: str                                 # 'cuda' or 'cpu'
    host_dir: Path                              # host-side files of this episode
    sandbox_factory: Callable[[], Any]
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    tool_timeout_s: float = 600.0
    last_code: str | None = None
    submitted: str | None = None
    _sandbox: Any = None
    _candidate_version: int = 0

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self.entry.manifest)

    @property
    def sandbox(self) -> Any:
        if self._sandbox is None:
            self._sandbox = self.sandbox_factory()
        return self._sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def code_from(self, args: Mapping[str, Any]) -> str:
        code = args.get("code")
        if code is None or (isinstance(code, str) and not code.strip()):
            if self.last_code is None:
                raise ToolArgumentError("no code: pass the whole submission file as `code`")
            return self.last_code
        if not isinstance(code, str):
            raise ToolArgumentError("`code` must be a string holding the whole Python file")
        self.last_code = code
        return code

    @property
    def is_translation(self) -> bool:
        from orchestrator.agent.prompts import is_translation

        return is_translation(self.entry)

    def candidate_path(self, code: str) -> Path:
        """Host copy of the candidate, one file per version (the pipeline reads it)."""
        self._candidate_version += 1
        self.host_dir.mkdir(parents=True, exist_ok=True)
        suffix = ".cu" if self.is_translation else ".py"
        path = self.host_dir / f"candidate_{self._candidate_version:03d}{suffix}"
        path.write_text(code)
        return path

    # ---- probe plumbing: everything lives in .probe/ so that nothing shadows the
    # orchestrator the scoring judge imports from the working directory
    def put_probe(self, code: str | None) -> None:
        files: dict[str, bytes] = {
            "popcorn_probe.py": (REPO_ORCHESTRATOR / "agent" / "probe.py").read_bytes(),
            "orchestrator/__init__.py": (REPO_ORCHESTRATOR / "__init__.py").read_bytes(),
        }
        folder = Path(self.entry.path)
        for path in sorted(folder.rglob("*")):  # the problem as the judge gets it: no solutions, no tests
            rel = path.relative_to(folder)
            if path.is_file() and rel.parts[0] not in ("solutions", "__pycache__") and not rel.name.startswith("test_"):
                files[f"problem/{rel.as_posix()}"] = path.read_bytes()
        files["problem/manifest.json"] = json.dumps(self.manifest).encode()
        for path in sorted((REPO_ORCHESTRATOR / "runner").glob("*.py")):
            files[f"orchestrator/runner/{path.name}"] = path.read_bytes()
        if code is not None:
            files["candidate.py"] = code.encode()
        self.sandbox.put_files({f"{PROBE_DIR}/{k}": v for k, v in files.items()})

    @property
    def probe_dir(self) -> str:
        return f"{str(self.sandbox.workdir).rstrip('/')}/{PROBE_DIR}"

    def probe_env(self) -> dict[str, str]:
        env = {"POPCORN_DEVICE": self.device, "TRITON_CACHE_DIR": f"{self.probe_dir}/triton_cache",
               "TORCH_EXTENSIONS_DIR": f"{self.probe_dir}/torch_ext", "PYTHONDONTWRITEBYTECODE": "1"}
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        from orchestrator.scoring.pipeline import sandbox_gpu_lock_path

        lock = sandbox_gpu_lock_path(self.sandbox) if self.device == "cuda" else None
        if lock:  # the kernels the probe runs outside a measurement take this host's GPU lock files shared
            env["POPCORN_GPU_LOCK"] = lock
        return env

    def exec(self, argv: list[str], timeout_s: float | None = None, env: dict[str, str] | None = None) -> Any:
        """Run a command in the sandbox, in the probe folder, with the probe's environment."""
        return self.sandbox.exec(argv, timeout_s=timeout_s or self.tool_timeout_s,
                                 env={**self.probe_env(), **(env or {})}, cwd=self.probe_dir)

    def probe(self, command: str, code: str | None, *extra: str,
              timeout_s: float | None = None) -> tuple[dict[str, Any] | None, Any]:
        """Run popcorn_probe.py; (parsed JSON or None, the ExecResult)."""
        self.put_probe(code)
        result = self.exec([self.sandbox.python, "popcorn_probe.py", command, *extra], timeout_s)
        return parse_probe(result.stdout), result


def parse_probe(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_PREFIX):
            try:
                value = json.loads(line[len(PROBE_PREFIX):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _failure_text(result: Any, what: str) -> str:
    if result.timed_out:
        return f"{what} timed out after {result.wall_s:.0f} s"
    tail = (result.stderr or result.stdout or "").strip()
    return f"{what} failed (exit {result.returncode}):\n{tail[-4000:]}"


# ---------------------------------------------------------------- verdict formatting

def format_verdict(verdict: Mapping[str, Any], mode: str) -> str:
    """A scoring verdict as concise text for the model (no hidden shapes, no seed)."""
    lines = [f"{mode}: {verdict.get('status', '?')}"
             + (f" ({verdict['failure_class']})" if verdict.get("failure_class") else "")]
    if verdict.get("failure_detail"):
        lines.append(str(verdict["failure_detail"]).strip())
    stages = verdict.get("stages") or {}
    load = stages.get("load") or {}
    if load.get("message") and load.get("message") != verdict.get("failure_detail"):
        lines.append(f"load: {load.get('status')}: {load['message']}".strip())
    elif load.get("status"):
        wall = f" in {load['wall_s']:.1f} s" if isinstance(load.get("wall_s"), (int, float)) else ""
        lines.append(f"load: {load['status']}{wall}")
    correctness = stages.get("correctness") or {}
    if correctness.get("status") and mode != "compile":
        shape = correctness.get("shape")
        lines.append(f"correctness at the disclosed shape {json.dumps(shape) if shape else ''}: "
                     f"{correctness['status']}".replace("  ", " "))
        for i, trial in enumerate(correctness.get("trials") or []):
            errs = ", ".join(f"{k}={trial[k]:.3g}" for k in ("max_abs_err", "rel_norm_err", "mismatch_fraction")
                             if isinstance(trial.get(k), (int, float)))
            msg = f": {trial['message']}" if trial.get("message") else ""
            lines.append(f"  trial {i} ({trial.get('kind', '?')}): {'passed' if trial.get('passed') else 'FAILED'}"
                         f"{' [' + errs + ']' if errs else ''}{msg}")
    findings = (stages.get("static_analysis") or {}).get("findings") or []
    for f in findings:
        lines.append(format_finding(f))
    for flag in verdict.get("flags") or []:
        lines.append(f"flag: {flag}")
    return "\n".join(lines)


def _field(finding: Any, key: str) -> Any:
    return finding.get(key) if isinstance(finding, Mapping) else getattr(finding, key, None)


def format_finding(f: Any) -> str:
    line = f"line {_field(f, 'line')}" if _field(f, "line") else "file"
    return f"{line}: [{_field(f, 'severity')}] {_field(f, 'rule')}: {_field(f, 'message')}"


# ---------------------------------------------------------------- tool implementations

def tool_submit(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    code = ws.code_from(args)
    ws.submitted = code
    return ToolResult("submitted: the episode ends and your code is scored now.", ok=True, ends_episode=True)


def _evaluate(ws: Workspace, code: str, mode: str) -> ToolResult:
    path = ws.candidate_path(code)
    verdict = ws.scoring.evaluate(ws.entry, path, ws.settings, mode=mode, sandbox=ws.sandbox)
    if verdict.get("failure_class") == "infra_error":
        raise InfraError(f"{mode} failed in the infrastructure: {verdict.get('failure_detail', '')}")
    return ToolResult(format_verdict(verdict, mode), ok=verdict.get("status") == "passed",
                      data={"verdict_status": verdict.get("status"), "failure_class": verdict.get("failure_class")})


def tool_compile(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    return _evaluate(ws, ws.code_from(args), "compile")


def tool_check(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    return _evaluate(ws, ws.code_from(args), "check")


def tool_static_analysis(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    code = ws.code_from(args)
    if ws.is_translation:
        return ToolResult("static analysis covers Python submissions; translation tasks are checked by "
                          "building and running them (compile, check)", ok=False)
    findings = ws.scoring.analyze(code, ws.manifest)
    if not findings:
        return ToolResult("static analysis: no findings")
    errors = sum(1 for f in findings if _field(f, "severity") == "error")
    head = f"static analysis: {len(findings)} finding(s), {errors} would reject the submission at scoring"
    return ToolResult("\n".join([head, *(format_finding(f) for f in findings)]), ok=errors == 0)


def ceilings_path(ws: Workspace, device_name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device_name).strip("-").lower() or "unknown"
    return Path(ws.settings.cache_dir) / "ceilings" / f"{ws.device}-{slug}.json"


def _device_specs(ws: Workspace) -> dict[str, Any]:
    info, result = ws.probe("specs", None, timeout_s=120)
    if info is None:
        raise InfraError(_failure_text(result, "reading the device properties"))
    return info


def _cached_ceilings(ws: Workspace, name: str) -> dict[str, Any] | None:
    path = ceilings_path(ws, name)
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def format_ceilings(c: Mapping[str, Any]) -> str:
    parts = [f"DRAM {c['dram_gbps']:.0f} GB/s" if "dram_gbps" in c else None,
             f"L2 {c['l2_gbps']:.0f} GB/s" if "l2_gbps" in c else None,
             f"FP32 {c['fp32_tflops']:.2f} TFLOP/s" if "fp32_tflops" in c else None,
             f"tensor BF16 {c['tensor_bf16_tflops']:.1f} TFLOP/s" if "tensor_bf16_tflops" in c else None]
    return ", ".join(p for p in parts if p)


def tool_specs(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    info = _device_specs(ws)
    lines = [f"device: {info.get('name')} ({info.get('device')})"]
    if info.get("device") == "cuda":
        mem = info.get("memory_bytes") or 0
        l2 = info.get("l2_bytes") or 0
        lines += [f"compute capability {info.get('compute_capability')}, {info.get('sms')} SMs, "
                  f"warp size {info.get('warp_size')}",
                  f"memory {mem / 2**30:.1f} GiB, L2 {l2 / 2**20:.0f} MiB, shared memory per block (opt-in) "
                  f"{(info.get('shared_memory_per_block_optin') or 0) // 1024} KiB, per SM "
                  f"{(info.get('shared_memory_per_sm') or 0) // 1024} KiB, registers per SM {info.get('registers_per_sm')}, "
                  f"max threads per SM {info.get('max_threads_per_sm')}"]
        for fragment, peaks in VENDOR_PEAKS:
            if fragment in str(info.get("name")):
                lines.append("vendor peaks (dense): " + ", ".join(
                    f"{k.replace('_tflops', '').upper()} {v:g} TFLOP/s" if k.endswith("tflops") else f"HBM {v:g} TB/s"
                    for k, v in peaks.items()))
                break
    else:
        lines.append(f"CPU only: {info.get('cpus')} cores, torch threads {info.get('torch_threads')}; "
                     "Triton kernels run in the interpreter (TRITON_INTERPRET=1), load_inline builds C++ only")
    lines.append(f"software: torch {info.get('torch')}, CUDA {info.get('cuda')}, triton {info.get('triton')}")
    cached = _cached_ceilings(ws, str(info.get("name")))
    lines.append("measured ceilings: " + (format_ceilings(cached) if cached else "not measured yet (call roofline)"))
    return ToolResult("\n".join(lines), data={"specs": info})


def tool_roofline(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    from orchestrator.runner.shapes import default_shape, evaluate

    code = ws.code_from(args)
    refused = _needs_cuda(ws, "roofline") if ws.is_translation else None
    if refused:
        return refused
    info = _device_specs(ws)
    name = str(info.get("name"))
    ceilings = _cached_ceilings(ws, name)
    measured_now = ceilings is None
    if ceilings is None:
        with measuring(ws.sandbox):
            ceilings, result = ws.probe("ceilings", None, timeout_s=600)
        if ceilings is None:
            raise InfraError(_failure_text(result, "measuring the ceilings"))
        ceilings["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path = ceilings_path(ws, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ceilings, indent=1))
    with measuring(ws.sandbox):
        timing, result = ws.probe("time", code, "--iters", "20" if ws.device == "cuda" else "1")
    lines = [f"ceilings of {name} ({'measured now' if measured_now else 'cached, measured ' + str(ceilings.get('measured_at'))}): "
             + format_ceilings(ceilings)]
    if timing is None:
        lines.append(_failure_text(result, "running your code at the disclosed shape"))
        return ToolResult("\n".join(lines), ok=False, data={"ceilings": ceilings})
    shape = timing.get("shape") or default_shape(ws.manifest["shapes"], ws.device)
    seconds = float(timing["median_ms"]) / 1e3
    flops = float(evaluate(ws.manifest["flops"], shape)) if ws.manifest.get("flops") else None
    nbytes = float(evaluate(ws.manifest["bytes"], shape)) if ws.manifest.get("bytes") else None
    lines.append(f"your code at the disclosed shape {json.dumps(shape)}: {timing['median_ms']:.4g} ms "
                 f"(median of {timing['n']})")
    bw = float(ceilings.get("dram_gbps", 0)) * 1e9
    peak = _compute_peak(ws.manifest, ceilings)
    if flops is not None and nbytes:
        intensity = flops / nbytes
        attainable = min(peak, intensity * bw) if bw and peak else 0.0
        bound = "memory" if bw and peak and intensity * bw < peak else "compute"
        lines.append(f"work (problem formulas): {flops / 1e9:.4g} GFLOP, {nbytes / 1e9:.4g} GB -> "
                     f"arithmetic intensity {intensity:.3g} FLOP/byte (ridge point {peak / bw if bw else 0:.3g})")
        lines.append(f"achieved: {flops / seconds / 1e12:.4g} TFLOP/s, {nbytes / seconds / 1e9:.4g} GB/s")
        if attainable:
            lines.append(f"{bound}-bound: attainable {attainable / 1e12:.4g} TFLOP/s; you reach "
                         f"{100 * flops / seconds / attainable:.3g}% of the roofline"
                         + (f" ({100 * nbytes / seconds / bw:.3g}% of measured DRAM bandwidth)" if bound == "memory" else ""))
    else:
        lines.append("this problem publishes no FLOP/byte formulas: only the time is known")
    return ToolResult("\n".join(lines), data={"ceilings": ceilings, "timing": timing})


def _compute_peak(manifest: Mapping[str, Any], ceilings: Mapping[str, Any]) -> float:
    dtype = str(manifest.get("dtype", "")).lower()
    if any(t in dtype for t in ("bf16", "bfloat16", "fp16", "float16", "half", "fp8")) \
            and ceilings.get("tensor_bf16_tflops"):
        return float(ceilings["tensor_bf16_tflops"]) * 1e12
    return float(ceilings.get("fp32_tflops", 0)) * 1e12


def _needs_cuda(ws: Workspace, tool: str) -> ToolResult | None:
    if ws.is_translation:
        return ToolResult(f"{tool} is not available for translation tasks (it runs Python submissions)", ok=False)
    if ws.device != "cuda":
        return ToolResult(f"{tool} needs a CUDA GPU; this episode runs on the CPU, where Triton kernels run "
                          "in the interpreter and nothing is compiled for a GPU.", ok=False)
    return None


def _find_tool(ws: Workspace, tool: str) -> str | None:
    # Nsight Compute installs as /opt/nvidia/nsight-compute/<version>/ncu, often off PATH.
    result = ws.exec(["sh", "-c", f"command -v {tool} || ls /usr/local/cuda/bin/{tool} 2>/dev/null"
                                  f" || ls -d /opt/nvidia/nsight-compute/*/{tool} 2>/dev/null | tail -1"], 30)
    path = result.stdout.strip().splitlines()
    return path[0] if result.returncode == 0 and path else None


NCU_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "WarpStateStats",
                "ComputeWorkloadAnalysis")
# Tensor-pipe use and the stall breakdown by name (a regex matching nothing is retried without them).
NCU_EXTRA_METRICS = ("regex:^sm__pipe_tensor_op_.*_cycles_active\\.avg\\.pct_of_peak_sustained_active$,"
                     "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio$")
_STALL = re.compile(r"^smsp__(?:average_warps_issue_stalled|average_warp_latency_issue_stalled)_(\w+?)"
                    r"(?:_per_issue_active)?\.ratio$")


def ncu_command(ncu: str, python: str, extra_metrics: bool, launch_count: int = 20) -> list[str]:
    argv = [ncu, "--csv", "--page", "raw", "--profile-from-start", "off", "--target-processes", "all",
            "--launch-count", str(launch_count), "--log-file", "ncu.csv"]
    for section in NCU_SECTIONS:
        argv += ["--section", section]
    if extra_metrics:
        argv += ["--metrics", NCU_EXTRA_METRICS]
    return argv + [python, "popcorn_probe.py", "run", "--iters", "1"]


def _run_ncu(ws: Workspace, ncu: str) -> tuple[Any, str]:
    """ncu with the extra metrics, then without them if that fails. A profiling session held by
    something outside this harness (DCGM, another user's ncu) is waited for a little."""
    result, text = None, ""
    for extra in (True, False):
        for wait_s in (10, 20, None):
            result, text = _ncu_once(ws, ncu, extra)
            if wait_s is None or not any(e in text + result.stdout + result.stderr for e in SESSION_REFUSED):
                break
            time.sleep(wait_s)
        if result.returncode == 0 and text.strip():
            break
    return result, text


def _ncu_once(ws: Workspace, ncu: str, extra_metrics: bool) -> tuple[Any, str]:
    ws.exec(["rm", "-f", "ncu.csv"], 30)
    result = ws.exec(ncu_command(ncu, ws.sandbox.python, extra_metrics), ws.tool_timeout_s)
    log = f"{PROBE_DIR}/ncu.csv"
    return result, ws.sandbox.get_files([log]).get(log, b"").decode(errors="replace")


def tool_profile(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    code = ws.code_from(args)
    refused = _needs_cuda(ws, "profile")
    if refused:
        return refused
    ncu = _find_tool(ws, "ncu")
    if ncu is None:
        return ToolResult("profile: Nsight Compute (ncu) is not installed in this sandbox", ok=False)
    ws.put_probe(code)
    with measuring(ws.sandbox, profiler=True):
        result, text = _run_ncu(ws, ncu)
    if "ERR_NVGPUCTRPERM" in text + result.stdout + result.stderr:
        return ToolResult("profile: this host does not allow access to GPU performance counters "
                          "(ERR_NVGPUCTRPERM); the benchmark operator must enable them.", ok=False,
                          data={"counters_restricted": True})
    kernels = parse_ncu_raw(text) or parse_ncu_raw(result.stdout)  # older ncu: the report on stdout
    if not kernels:
        return ToolResult(_failure_text(result, "profile") + ("\n" + text[-2000:] if text else ""), ok=False)
    wanted = args.get("kernel")
    if isinstance(wanted, str) and wanted:
        kernels = [k for k in kernels if wanted in k["name"]] or kernels
    return ToolResult(format_ncu(kernels), data={"kernels": kernels})


def _number(value: str) -> float | None:
    try:
        return float(value.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def parse_ncu_raw(text: str) -> list[dict[str, Any]]:
    """ncu --csv --page raw: a header of metric names, a row of units, one row per kernel."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units = rows[0], rows[1]
    kernels = []
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        values = dict(zip(header, row))
        metrics = {name: (_number(v), units[i]) for i, (name, v) in enumerate(zip(header, row)) if "__" in name}
        kernels.append({"name": values.get("Kernel Name", "?"), "grid": values.get("Grid Size", ""),
                        "block": values.get("Block Size", ""),
                        "metrics": {k: v for k, v in metrics.items() if v[0] is not None}})
    return kernels


def _metric(k: Mapping[str, Any], name: str) -> tuple[float, str] | None:
    value = k["metrics"].get(name)
    return (value[0], value[1]) if value else None


def _nanoseconds(metric: tuple[float, str] | None) -> float:
    if not metric:
        return 0.0
    value, unit = metric
    return value * {"us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)


def format_ncu(kernels: list[dict[str, Any]], limit: int = 10) -> str:
    out = [f"{len(kernels)} kernel launch(es) profiled at the disclosed shape (ncu)"
           + (f"; the {limit} longest:" if len(kernels) > limit else "")]
    longest = sorted(kernels, key=lambda k: -_nanoseconds(_metric(k, "gpu__time_duration.sum")))
    for k in longest[:limit]:
        dur = _metric(k, "gpu__time_duration.sum")
        dur_text = f"{dur[0]:.4g} {dur[1]}" if dur else "?"
        out.append(f"kernel {k['name'][:120]} grid {k['grid']} block {k['block']}: {dur_text}")
        sol = [(label, _metric(k, name)) for label, name in (
            ("SM", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            ("memory", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
            ("DRAM", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            ("L2", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
            ("L1", "l1tex__throughput.avg.pct_of_peak_sustained_active"))]
        out.append("  speed of light: " + ", ".join(f"{label} {m[0]:.1f}%" for label, m in sol if m))
        bw = _metric(k, "dram__bytes.sum.per_second")
        occupancy = _metric(k, "sm__warps_active.avg.pct_of_peak_sustained_active")
        extra = []
        if bw:
            extra.append(f"DRAM throughput {bw[0]:.4g} {bw[1]}")
        if occupancy:
            extra.append(f"achieved occupancy {occupancy[0]:.1f}%")
        regs = _metric(k, "launch__registers_per_thread")
        if regs:
            extra.append(f"{regs[0]:.0f} registers/thread")
        if extra:
            out.append("  " + ", ".join(extra))
        tensor: dict[str, float] = {}  # one figure per pipe family (ncu reports several per family)
        for n, v in k["metrics"].items():
            if n.startswith("sm__pipe_tensor_op_") and n.endswith("pct_of_peak_sustained_active"):
                family = n.split("sm__pipe_tensor_op_")[1].split("_cycles")[0].split("_type_")[0]
                tensor[family] = max(tensor.get(family, 0.0), v[0])
        busy = {n: v for n, v in tensor.items() if v >= 0.05}
        out.append("  tensor pipe: " + (", ".join(f"{n} {v:.1f}%" for n, v in sorted(busy.items())) if busy else
                                        "idle" if tensor else "not reported"))
        stalls = sorted(((m.group(1), v[0]) for n, v in k["metrics"].items() if (m := _STALL.match(n))),
                        key=lambda s: -s[1])
        if stalls:
            out.append("  warp stalls (cycles per issued instruction): "
                       + ", ".join(f"{n} {v:.2f}" for n, v in stalls[:6] if v > 0))
    if len(kernels) > limit:
        out.append(f"[{len(kernels) - limit} more kernel launches not shown]")
    return "\n".join(out)


_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;?\s*(/\*.*\*/)?\s*$")


def filter_sass(text: str) -> list[tuple[str, list[str]]]:
    """cuobjdump -sass output -> [(function name, instructions)]."""
    functions: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        header = re.match(r"^\s*Function\s*:\s*(\S+)", line)
        if header:
            functions.append((header.group(1), []))
            continue
        m = _SASS_LINE.match(line)
        if m and functions:
            instruction = m.group(1).strip().rstrip(";").strip()
            if instruction:
                functions[-1][1].append(instruction)
    return functions


def filter_ptx(text: str) -> str:
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".loc", ".file")):
            continue
        if s.startswith(".section") or s.startswith("@@DWARF"):
            break  # debug sections follow the code
        keep.append(line.rstrip())
    return "\n".join(keep)


def tool_disassemble(ws: Workspace, args: Mapping[str, Any]) -> ToolResult:
    code = ws.code_from(args)
    refused = _needs_cuda(ws, "disassemble")
    if refused:
        return refused
    what = args.get("what") or "sass"
    if what not in ("sass", "ptx", "both"):
        raise ToolArgumentError("`what` must be 'sass', 'ptx' or 'both'")
    wanted = args.get("kernel") if isinstance(args.get("kernel"), str) else None
    ws.exec(["rm", "-rf", "triton_cache"], 30)
    found, result = ws.probe("kernels", code)
    if found is None:
        return ToolResult(_failure_text(result, "running your code"), ok=False)
    binaries = list(found.get("cubin", [])) + list(found.get("so", []))
    if not binaries and not found.get("ptx"):
        return ToolResult("disassemble: your code left no compiled GPU kernel (Triton cache or load_inline build)",
                          ok=False)
    out: list[str] = []
    if what in ("sass", "both"):
        cuobjdump = _find_tool(ws, "cuobjdump")
        if cuobjdump is None:
            out.append("SASS: cuobjdump is not installed in this sandbox")
        for binary in binaries:
            if cuobjdump is None:
                break
            dumped = ws.exec([cuobjdump, "-sass", binary], 120)
            for name, instructions in filter_sass(dumped.stdout):
                if wanted and wanted not in name:
                    continue
                out.append(f"== SASS {name} ({len(instructions)} instructions) ==")
                out += instructions
    if what in ("ptx", "both"):
        ptx: dict[str, str] = {path: data.decode(errors="replace") for path, data in
                               ws.sandbox.get_files([_relative(ws, p) for p in found.get("ptx", [])]).items()}
        dumper = _find_tool(ws, "cuobjdump") if found.get("so") else None
        for library in found.get("so", []):
            if dumper is not None:  # load_inline builds: PTX embedded in the library
                ptx[library] = ws.exec([dumper, "-ptx", library], 120).stdout
        for path, source in ptx.items():
            text = filter_ptx(source)
            if not text or wanted and wanted not in text:
                continue
            out.append(f"== PTX {Path(path).name} ==")
            out.append(text)
    if not out:
        return ToolResult("disassemble: no kernel matched", ok=False)
    return ToolResult("\n".join(out))


def _relative(ws: Workspace, path: str) -> str:
    root = str(ws.sandbox.workdir).rstrip("/") + "/"
    return path[len(root):] if path.startswith(root) else path


HANDLERS: dict[str, Callable[[Workspace, Mapping[str, Any]], ToolResult]] = {
    "submit": tool_submit, "compile": tool_compile, "check": tool_check, "specs": tool_specs,
    "static_analysis": tool_static_analysis, "profile": tool_profile, "disassemble": tool_disassemble,
    "roofline": tool_roofline,
}


def call_tool(ws: Workspace, harness: str, name: str, raw_arguments: str) -> ToolResult:
    """Run one tool call of the model. Model mistakes come back as ok=False results;
    infrastructure failures (InfraError, SandboxError) propagate."""
    allowed = HARNESS_TOOLS[harness]
    if name not in allowed:
        return ToolResult(f"error: no tool named {name!r}; available: {', '.join(allowed)}", ok=False)
    try:
        args = parse_arguments(raw_arguments)
    except ValueError as exc:
        return ToolResult(f"error: the arguments of {name} are not a valid JSON object ({exc}); "
                          'send e.g. {"code": "<the whole file>"}', ok=False)
    try:
        result = HANDLERS[name](ws, args)
    except ToolArgumentError as exc:
        return ToolResult(f"error: {exc}", ok=False)
    text, trimmed = trim(result.text, ws.output_limit)
    if trimmed:
        result.data["trimmed_from"] = len(result.text)
    result.text = text
    return result
