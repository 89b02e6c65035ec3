"""Build recipes: every side of a task becomes one shared library exporting the entry point.

    a100       the task's a100 adapter (which includes the A100 upstream source), built
               for sm_90 so the A100 code runs on an H100/H200 as the baseline
    h100       the h100 adapter around the human-written H100 reference, for sm_90a
    candidate  the model's .cu file, for sm_90a, with the entry header force-included
               (a definition that does not match the declared signature fails to compile)

The command is `nvcc -shared` with the manifest's std, flags and include directories
(inside the unpacked pins), plus the task folder. Libraries are cached on disk under
`cache_dir/translation/builds/<task>/<side>-<key>/`, the key hashing everything that
went into the build: the nvcc version, the command, the adapter, header and candidate
texts, and the pins' sha256 with their source fixes (which fix every upstream file).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from orchestrator.errors import InfraError, UserError
from orchestrator.translation import buildjail, sources
from orchestrator.translation.catalog import Task

SIDES = ("a100", "h100", "candidate")
LOG_LIMIT = 200_000


class BuildError(UserError):
    """The baseline or the reference of a task failed to build: a recipe bug, not the model's."""


@dataclass(frozen=True)
class BuildResult:
    side: str
    ok: bool
    library: Path | None
    log: str
    wall_s: float
    cached: bool
    key: str
    command: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "ok": self.ok, "library": str(self.library) if self.library else None,
                "wall_s": round(self.wall_s, 2), "cached": self.cached, "key": self.key}


def nvcc_path() -> str:
    found = shutil.which("nvcc") or (str(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"))
    if not Path(found).exists():
        raise InfraError("nvcc not found: install the CUDA toolkit or run scripts/install/translation.sh")
    return found


@lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def _gencode(arch: str) -> list[str]:
    number = arch.removeprefix("sm_")
    return ["-gencode", f"arch=compute_{number},code=sm_{number}"]


def _include_dirs(task: Task, roots: Mapping[str, Path], sides: tuple[str, ...]) -> list[Path]:
    m = task.manifest
    entries = list(m["build"]["includes"])
    for side in sides:
        entries += m[side].get("includes", [])
    dirs: list[Path] = [task.path]
    dirs += [task.path.parent.parent / rel for rel in m["build"].get("local_includes", [])]
    for inc in entries:
        path = roots[inc["pin"]] / inc["path"]
        if path not in dirs:
            dirs.append(path)
    return dirs


def command(task: Task, side: str, roots: Mapping[str, Path], source: Path, output: Path,
            nvcc: str | None = None) -> list[str]:
    """The nvcc command line that builds `side` of `task` from `source` into `output`."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}")
    m = task.manifest
    spec_side = "h100" if side == "candidate" else side
    arch = m[spec_side]["arch"]
    include_sides = ("a100", "h100") if side == "candidate" else (side,)
    cmd = [nvcc or nvcc_path(), "-shared", "-Xcompiler", "-fPIC", f"-std={m['build']['std']}"]
    if m["build"].get("host_compiler"):
        cmd += ["-ccbin", m["build"]["host_compiler"]]
    cmd += list(m["build"]["flags"]) + list(m[spec_side].get("flags", [])) + _gencode(arch)
    cmd += [f"-I{d}" for d in _include_dirs(task, roots, include_sides)]
    if side == "candidate":
        cmd += ["-include", str(task.file(m["entry"]["header"]))]
    cmd += [str(source), "-o", str(output)]
    return cmd


def source_for(task: Task, side: str, candidate: Path | None) -> Path:
    if side == "candidate":
        if candidate is None:
            raise ValueError("the candidate side needs a candidate file")
        return Path(candidate)
    adapter = task.manifest[side].get("adapter")
    if not adapter:
        raise BuildError(f"{task.id}: no {side} adapter yet (glue is {task.manifest['glue']!r})")
    return task.file(adapter)


def cache_key(task: Task, side: str, cmd: list[str], source: Path, roots: Mapping[str, Path]) -> str:
    m = task.manifest
    parts = {
        "nvcc": nvcc_version(cmd[0]),
        "command": [c.replace(str(task.path.parent.parent), "<translation>") for c in _canonical(cmd, roots)[1:]],
        "source": hashlib.sha256(source.read_bytes()).hexdigest(),
        "header": hashlib.sha256(task.file(m["entry"]["header"]).read_bytes()).hexdigest(),
        "pins": sorted(pin.identity for pin in sources.pins_of(m).values()),
        "local": _local_digest(task),
        "side": side,
    }
    if side == "candidate":
        parts["h100_adapter"] = ""  # the candidate does not see the adapters
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _local_digest(task: Task) -> str:
    """Hash of our own files a build can include: the task folder (adapters' helper headers,
    shims), the manifest's local_includes, and any other task folder its files name (a task
    may include a sibling's headers by relative path). Editing any of them rebuilds."""
    root = task.path.parent.parent
    own = _own_files(task.path)
    folders = [task.path] + [root / rel for rel in task.manifest["build"].get("local_includes", [])]
    text = b"\n".join(f.read_bytes() for f in own)
    folders += [d for d in sorted(root.glob("*/tr-*")) if d != task.path and d.name.encode() in text]
    digest = hashlib.sha256()
    for folder in folders:
        for f in _own_files(folder):
            digest.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


BUILD_SUFFIXES = (".h", ".cuh", ".hpp", ".cu", ".cpp", ".cc", ".inc", ".inl")


def _own_files(folder: Path) -> list[Path]:
    """The files of ours a compiler can read (task.py, the manifest and the Dockerfile cannot)."""
    return [f for f in sorted(folder.rglob("*")) if f.is_file() and f.suffix in BUILD_SUFFIXES]


def _canonical(cmd: list[str], roots: Mapping[str, Path]) -> list[str]:
    out = []
    for c in cmd:
        for key, root in roots.items():
            c = c.replace(str(root), f"<{key}>")
        out.append(c)
    return out


def build(task: Task, side: str, roots: Mapping[str, Path], cache_dir: Path, candidate: Path | None = None,
          timeout_s: float | None = None, nvcc: str | None = None) -> BuildResult:
    """Build (or find in the cache) one side. A failed candidate build is data (ok=False);
    a failed a100/h100 build raises BuildError with the log's path."""
    source = source_for(task, side, candidate)
    out_root = Path(cache_dir) / "translation" / "builds" / task.id
    cmd = command(task, side, roots, source, Path("lib.so"), nvcc)
    key = cache_key(task, side, cmd, source, roots)
    final = out_root / f"{side}-{key[:16]}"
    if (final / "build.json").is_file():
        meta = json.loads((final / "build.json").read_text())
        return BuildResult(side, True, final / "lib.so", (final / "build.log").read_text(), meta["wall_s"], True,
                           key, meta["command"])
    out_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_root, prefix=f".{side}-"))
    try:
        src_copy = work / source.name if side == "candidate" else source
        if side == "candidate":
            shutil.copyfile(source, src_copy)
        cmd = command(task, side, roots, src_copy, work / "lib.so", nvcc)
        run_cmd, env = cmd, None
        if side == "candidate":  # the candidate's preprocessor must not read our files (buildjail.py)
            run_cmd, env = buildjail.wrap(cmd, work, [*roots.values(), task.path.parent.parent])
        limit = timeout_s or float(task.manifest["time_limits"]["build_s"])
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(run_cmd, capture_output=True, text=True, timeout=limit, cwd=work, check=False,
                                  env=env)
            log, ok = (proc.stdout + proc.stderr)[-LOG_LIMIT:], proc.returncode == 0
            if side == "candidate" and proc.returncode == buildjail.SETUP_FAILED:  # ours, not the candidate's
                raise buildjail.BuildIsolationError(f"{task.id}: {log.strip()[-2000:]}")
        except subprocess.TimeoutExpired as exc:
            log, ok = f"nvcc timed out after {limit:.0f} s\n{exc.stderr or ''}", False
        wall = time.perf_counter() - t0
        (work / "build.log").write_text(log)
        if not ok:
            if side == "candidate":
                return BuildResult(side, False, None, log, wall, False, key, cmd)
            kept = out_root / f"failed-{side}-{key[:16]}.log"
            kept.write_text(" ".join(cmd) + "\n\n" + log)
            raise BuildError(f"{task.id}: the {side} build failed after {wall:.0f} s; see {kept}")
        meta = {"task": task.id, "side": side, "key": key, "wall_s": wall, "nvcc": nvcc_version(cmd[0]),
                "command": _canonical(cmd, roots), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (work / "build.json").write_text(json.dumps(meta, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
        return BuildResult(side, True, final / "lib.so", log, wall, False, key, cmd)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


IPC_HELPER = Path(__file__).resolve().parents[2] / "translation" / "common" / "ipc" / "popcorn_ipc.cu"


def build_ipc_helper(cache_dir: Path, nvcc: str | None = None, timeout_s: float = 300) -> Path:
    """The harness's CUDA IPC helper for multi-GPU tasks (translation/common/ipc), built once per content."""
    nvcc = nvcc or nvcc_path()
    key = hashlib.sha256(IPC_HELPER.read_bytes() + nvcc_version(nvcc).encode()).hexdigest()[:16]
    out = Path(cache_dir) / "translation" / "builds" / "_ipc" / key / "libpopcorn_ipc.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-O2", *_gencode("sm_90"), str(IPC_HELPER), "-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise BuildError(f"the CUDA IPC helper failed to build: {(proc.stdout + proc.stderr)[-2000:]}")
    os.replace(tmp, out)
    return out
