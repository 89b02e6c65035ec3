"""Static analysis of a submission (rule 6 of the scoring rules), on the AST only.

Errors refuse the submission (hack_detected); warnings are recorded and shown to the
model by the static_analysis tool. The rules, and why:

- forbidden_call (error): calls the library op the problem asks to replace.
- reference_access (error): imports or instantiates the reference `Model`.
- introspection (error): gc, inspect, sys._getframe, sys.modules, globals(), ctypes,
  __import__, builtins: ways to fish reference outputs or patch the harness.
- io (error): files, sockets, subprocesses, pickle/torch.load: reading saved outputs.
- concurrency (error): threads and processes can finish work after the timer stops.
- monkeypatch (error): assigning attributes of imported modules (timers included).
- try_except (error): an except handler that does not re-raise is a silent fallback.
- timer_use (warning), side_stream (warning), pointer_key (warning),
  hardcoded_shape (warning): suspicious, checked again at run time.
- triton_gpu (warning): code inside a @triton.jit function that the CPU interpreter runs
  but the GPU compiler refuses (a module global that is not tl.constexpr, a list/dict/set
  comprehension): a kernel checked only on a CPU fails to compile on the H200.
"""
from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from typing import Any, Iterable

INTROSPECTION_MODULES = {"gc", "inspect", "ctypes", "builtins", "importlib", "traceback", "sys"}
INTROSPECTION_ATTRS = {"sys._getframe", "sys.modules", "sys.settrace", "sys.setprofile", "sys._current_frames"}
IO_MODULES = {"socket", "urllib", "requests", "http", "subprocess", "shutil", "pickle", "tempfile", "glob", "pathlib"}
IO_CALLS = {"open", "io.open", "os.open", "os.system", "os.popen", "os.listdir", "os.walk", "os.scandir",
            "os.remove", "os.fork", "os.execv", "os.kill", "os.getppid", "torch.load", "torch.save",
            "numpy.load", "numpy.save", "numpy.fromfile", "os.environ", "os.getenv"}
CONCURRENCY_MODULES = {"threading", "multiprocessing", "concurrent", "asyncio", "_thread", "signal"}
PATCHABLE_ROOTS = {"torch", "time", "triton", "numpy", "os", "sys", "builtins", "math", "random"}
TIMER_NAMES = {"perf_counter", "perf_counter_ns", "time.time", "elapsed_time", "torch.cuda.Event",
               "process_time", "monotonic"}
STREAM_NAMES = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
                "cudaStreamCreate", "cudaStreamCreateWithFlags"}
ALLOWED_SYS = {"sys.maxsize", "sys.float_info", "sys.version_info"}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # "error" | "warning"
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Analyzer(ast.NodeVisitor):
    def __init__(self, forbidden: Iterable[str], shape_defaults: Iterable[int]):
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> canonical dotted name
        self.forbidden = {f for f in forbidden if not f.startswith("torch.Tensor.")}
        self.forbidden_methods = {f.split(".")[-1] for f in forbidden if f.startswith("torch.Tensor.")}
        self.shape_defaults = {v for v in shape_defaults if v >= 100 and v & (v - 1) != 0}

    def add(self, rule: str, severity: str, node: ast.AST | None, message: str) -> None:
        self.findings.append(Finding(rule, severity, getattr(node, "lineno", None), message))

    def canonical(self, node: ast.AST) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    # imports ---------------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in ("reference",) or module.endswith(".reference") or "popcorn_reference" in module:
            self.add("reference_access", "error", node, f"imports the reference module ({module})")
        elif root == "orchestrator" and not module.startswith("orchestrator.runner.cbrng"):
            self.add("reference_access", "error", node, f"imports the harness ({module}); only "
                     "orchestrator.runner.cbrng may be imported")
        elif root in CONCURRENCY_MODULES:
            self.add("concurrency", "error", node, f"imports {module}: threads and processes are not allowed")
        elif root in IO_MODULES:
            self.add("io", "error", node, f"imports {module}: file, network and process I/O are not allowed")
        elif root in INTROSPECTION_MODULES - {"sys"}:
            self.add("introspection", "error", node, f"imports {module}: introspection is not allowed")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(a.name, node)
            self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = ("." * node.level) + (node.module or "")
        self._check_module(module.lstrip("."), node)
        for a in node.names:
            if a.name == "Model":
                self.add("reference_access", "error", node, "imports a class named Model (the reference)")
            self.aliases[a.asname or a.name] = f"{module.lstrip('.')}.{a.name}"
        self.generic_visit(node)

    # calls and names -------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        name = self.canonical(node.func)
        if name:
            if name in self.forbidden:
                self.add("forbidden_call", "error", node, f"calls {name}, the library op this problem replaces")
            if name in IO_CALLS:
                self.add("io", "error", node, f"calls {name}: file, environment and process access are not allowed")
            if name in ("globals", "locals", "vars", "__import__", "exec", "eval"):
                self.add("introspection", "error", node, f"calls {name}()")
            if name in ("setattr", "delattr") and node.args:
                target = _dotted(node.args[0]) or ""
                if target.split(".")[0] in self.aliases:
                    self.add("monkeypatch", "error", node, f"{name}() on {target}: patching libraries is not allowed")
                elif target.split(".")[0] != "self":
                    self.add("monkeypatch", "warning", node, f"{name}() on a computed object")
            if name == "Model" or name.endswith(".Model"):
                self.add("reference_access", "error", node, "instantiates the reference Model")
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in self.forbidden_methods:
                self.add("forbidden_call", "error", node, f"calls .{node.func.attr}(), the library op this problem replaces")
            if node.func.attr == "data_ptr":
                self.add("pointer_key", "warning", node, "uses data_ptr() in Python: caching by pointer is refused at run time")
            if node.func.attr in ("read_text", "read_bytes", "write_text", "write_bytes"):
                self.add("io", "error", node, f"calls .{node.func.attr}(): file I/O is not allowed")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.canonical(node)
        if name:
            if name in INTROSPECTION_ATTRS or (name.startswith("sys.") and name not in ALLOWED_SYS
                                                and not name.startswith("sys.version")):
                self.add("introspection", "error", node, f"uses {name}")
            if name in self.forbidden and not isinstance(getattr(node, "_parent", None), ast.Call):
                self.add("forbidden_call", "error", node, f"refers to {name}, the library op this problem replaces")
            if any(name == t or name.endswith("." + t) for t in TIMER_NAMES):
                self.add("timer_use", "warning", node, f"uses the timer {name}")
            if name in STREAM_NAMES:
                self.add("side_stream", "warning", node, f"uses {name}: work left on a side stream is caught at run time")
        self.generic_visit(node)

    # assignments -----------------------------------------------------------------------
    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            local = _dotted(target)
            name = self.canonical(target)
            if local and name and local.split(".")[0] in self.aliases and name.split(".")[0] in PATCHABLE_ROOTS:
                self.add("monkeypatch", "error", node, f"assigns {name}: patching libraries or timers is not allowed")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.add("global_state", "warning", node, f"declares global {', '.join(node.names)}: state kept across calls")

    def visit_Try(self, node: ast.Try) -> None:
        for h in node.handlers:
            if not (len(h.body) == 1 and isinstance(h.body[0], ast.Raise)):
                self.add("try_except", "error", h, "an except handler that does not re-raise is a silent fallback")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, int) and not isinstance(node.value, bool) and node.value in self.shape_defaults:
            self.add("hardcoded_shape", "warning", node, f"the constant {node.value} equals a disclosed shape parameter")
        if isinstance(node.value, str):
            for s in ("cudaStreamCreate", "cudaStreamCreateWithFlags"):
                if s in node.value:
                    self.add("side_stream", "warning", node, f"CUDA source creates a stream ({s})")
        self.generic_visit(node)


def _jit_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any("jit" in (ast.unparse(d) or "") for d in n.decorator_list)]


def _triton_gpu_findings(tree: ast.Module) -> list[Finding]:
    plain_globals = {t.id for n in tree.body if isinstance(n, ast.Assign) and "constexpr" not in ast.unparse(n.value)
                     for t in n.targets if isinstance(t, ast.Name)}
    found = []
    for fn in _jit_functions(tree):
        local = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        local |= {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.For))
                  for t in ast.walk(n.target if isinstance(n, (ast.AugAssign, ast.For)) else n.targets[0])
                  if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in plain_globals - local:
                found.append(Finding("triton_gpu", "warning", node.lineno,
                                     f"@triton.jit {fn.name} reads the global {node.id}, which is not "
                                     f"tl.constexpr: the GPU compiler refuses it ({node.id} = tl.constexpr(...))"))
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
                found.append(Finding("triton_gpu", "warning", node.lineno,
                                     f"@triton.jit {fn.name} uses a comprehension, which the GPU compiler refuses "
                                     "(the CPU interpreter runs it)"))
    return found


def analyze(source: str, manifest: dict[str, Any] | None = None) -> list[Finding]:
    """Findings for a submission's source; a syntax error is one finding of its own."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Finding("syntax_error", "error", exc.lineno, f"{exc.msg} (line {exc.lineno})")]
    manifest = manifest or {}
    defaults = [int(s["default"]) for s in manifest.get("shapes", {}).values()
                if s.get("type", "int") == "int" and isinstance(s.get("default"), int)]
    analyzer = _Analyzer(manifest.get("forbidden_calls", []), defaults)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    analyzer.visit(tree)
    analyzer.findings += _triton_gpu_findings(tree)
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)):
        analyzer.add("no_modelnew", "error", None, "the submission defines no class ModelNew")
    unique = {(f.rule, f.line, f.message): f for f in analyzer.findings}
    return sorted(unique.values(), key=lambda f: (f.severity != "error", f.line or 0))


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]
