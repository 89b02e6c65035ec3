"""`local` sandbox: a subprocess tree in new namespaces, for hosts without Docker.

- network: a new, empty network namespace (`unshare --net`; as a non-root user
  `unshare --user --map-root-user --net`), so nothing outside can be reached;
- processes: a new PID namespace with its own /proc (`--pid --fork --kill-child
  --mount-proc`; CUDA fails with error 304 in a PID namespace that still sees the
  host's /proc), whose init is killed with the sandbox, plus the host-side process
  group: a wall-clock
  timeout kills everything the command started, including daemons it spawned;
- limits: a cgroup (v2, or v1 `pids` and `memory`) where one is writable, else
  RLIMIT_AS on CPU-only sandboxes (RLIMIT_AS breaks CUDA, which reserves address
  space); RLIMIT_FSIZE and no core dumps always;
- environment: built from scratch (no API keys or tokens from the host);
- the checkout's problems/ (oracle solutions), results/ and caches: covered by empty
  tmpfs mounts in the sandbox's mount namespace;
- files: a private working directory, removed on close.

Where the OS refuses a namespace the sandbox records it in `isolation`, and
`require_isolation` (default on) turns that into SandboxUnavailable.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Mapping, Sequence

from orchestrator.config import REPO_ROOT
from orchestrator.sandbox.base import ExecResult, Sandbox, SandboxSpec, SandboxUnavailable, register, thread_env

CGROUP_ROOT = Path("/sys/fs/cgroup")
# Folders of this checkout a sandbox must not read: our oracle solutions, earlier
# results, downloaded and built sources. Inside the sandbox's own mount namespace each
# is covered by an empty, unreadable tmpfs (the runner's code under orchestrator/ stays).
HIDDEN = tuple(str(REPO_ROOT / d) for d in ("problems", "results", ".cache", "translation", "tests"))
HIDE_AND_EXEC = ('for d in $POPCORN_HIDE; do [ -d "$d" ] && '
                 'mount -t tmpfs -o size=4k,mode=000 popcorn-hidden "$d"; done; '
                 'unset POPCORN_HIDE; exec "$@"')


@functools.lru_cache(maxsize=1)
def namespace_prefix() -> tuple[str, ...] | None:
    """The unshare prefix this host allows, or None if no network namespace is possible."""
    unshare = shutil.which("unshare")
    if not unshare:
        return None
    candidates = [(unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc")]
    if os.geteuid() != 0:
        candidates.insert(0, (unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"))
    for prefix in candidates:
        try:
            ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return prefix
    return None


class _Cgroup:
    """A cgroup for one sandbox: v2 if the unified hierarchy has the controllers, else v1."""

    def __init__(self, name: str, memory: int, pids: int):
        self.dirs: list[Path] = []
        self.kind = "none"
        v2 = CGROUP_ROOT / "cgroup.controllers"
        try:
            if v2.exists() and {"memory", "pids"} <= set(v2.read_text().split()):
                d = CGROUP_ROOT / name
                d.mkdir()
                self.dirs = [d]
                (d / "memory.max").write_text(str(memory))
                (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(pids))
                self.kind = "v2"
            elif (CGROUP_ROOT / "memory" / "cgroup.procs").exists() and (CGROUP_ROOT / "pids" / "cgroup.procs").exists():
                mem, pid = CGROUP_ROOT / "memory" / name, CGROUP_ROOT / "pids" / name
                mem.mkdir()
                self.dirs.append(mem)
                pid.mkdir()
                self.dirs.append(pid)
                (mem / "memory.limit_in_bytes").write_text(str(memory))
                (pid / "pids.max").write_text(str(pids))
                self.kind = "v1"
        except OSError:
            self.remove()
            self.kind = "none"

    def join(self) -> None:
        """Called in the child between fork and exec."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def oom_killed(self) -> bool:
        try:
            if self.kind == "v2":
                events = dict(line.split() for line in (self.dirs[0] / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0)) > 0
            if self.kind == "v1":
                return int((self.dirs[0] / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError, IndexError):
            pass
        return False

    def kill_all(self) -> None:
        for _ in range(20):
            pids = set()
            for d in self.dirs:
                try:
                    pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
                except OSError:
                    pass
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.dirs = []


def _drain(stream: IO[bytes], limit: int, sink: list[bytes], over: list[bool]) -> None:
    kept = 0
    for chunk in iter(lambda: stream.read(65536), b""):
        if kept < limit:
            sink.append(chunk[: limit - kept])
            kept += min(len(chunk), limit - kept)
        if kept >= limit and len(chunk):
            over[0] = over[0] or kept + len(chunk) > limit
    stream.close()


@register("local")
class LocalSandbox(Sandbox):
    require_isolation = True

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        prefix = namespace_prefix()
        if prefix is None and not spec.network and self.require_isolation:
            raise SandboxUnavailable("the local sandbox needs a network namespace (unshare --net) and this "
                                     "host refuses one; use --sandbox docker, or run as root")
        self._prefix: tuple[str, ...] = () if spec.network else (prefix or ())
        self._dir = Path(tempfile.mkdtemp(prefix="popcorn-sbx-"))
        self._work = self._dir / "work"
        self._work.mkdir()
        (self._work / "tmp").mkdir()
        os.chmod(self._dir, 0o700)
        name = f"popcorn-{spec.run_id}-{uuid.uuid4().hex[:8]}".replace("/", "_")
        self._cgroup = _Cgroup(name, spec.memory_bytes, spec.pids)
        self._closed = False

    @property
    def workdir(self) -> str:
        return str(self._work)

    @property
    def python(self) -> str:
        return sys.executable

    @property
    def isolation(self) -> dict[str, object]:
        return {"network": "namespace" if self._prefix and not self.spec.network else "host",
                "hidden_paths": list(HIDDEN) if self._prefix else [],
                "pid_namespace": bool(self._prefix), "cgroup": self._cgroup.kind,
                "memory_limit": self._cgroup.kind != "none" or not self.spec.gpus,
                "clean_env": True, "user": "root" if os.geteuid() == 0 else "unprivileged"}

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        python_dir = os.path.dirname(sys.executable)
        env = {
            "PATH": f"{python_dir}:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self._work), "TMPDIR": str(self._work / "tmp"), "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "TRITON_CACHE_DIR": str(self._work / ".triton"),
            "TORCH_EXTENSIONS_DIR": str(self._work / ".torch_extensions"),
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in self.spec.gpus),
            # NVLink multicast can take a shared host's GPUs out of service: never on.
            "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            **thread_env(self.spec.cpus),
        }
        for key in ("LD_LIBRARY_PATH", "CUDA_HOME"):
            if key in os.environ:  # toolchain locations, never credentials
                env[key] = os.environ[key]
        env.update(self.spec.env)
        env.update(extra or {})
        if self._prefix:
            env["POPCORN_HIDE"] = " ".join(HIDDEN)
        return env

    def _preexec(self) -> None:
        self._cgroup.join()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.spec.file_size_bytes, self.spec.file_size_bytes))
        if self._cgroup.kind == "none":
            if os.geteuid() != 0:
                resource.setrlimit(resource.RLIMIT_NPROC, (self.spec.pids, self.spec.pids))
            if not self.spec.gpus:
                resource.setrlimit(resource.RLIMIT_AS, (self.spec.memory_bytes, self.spec.memory_bytes))

    def exec(self, cmd: Sequence[str], *, timeout_s: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        if self._closed:
            raise SandboxUnavailable("the sandbox is closed")
        argv = [*self._prefix, "sh", "-c", HIDE_AND_EXEC, "popcorn-sandbox", *cmd] if self._prefix else list(cmd)
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, cwd=cwd or self._work, env=self._env(env), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                    preexec_fn=self._preexec)
        except FileNotFoundError as exc:
            return ExecResult(127, "", f"{exc}", time.perf_counter() - start)
        except OSError as exc:
            raise SandboxUnavailable(f"cannot start a process in the local sandbox: {exc}") from exc
        out: list[bytes] = []
        err: list[bytes] = []
        over = [False]
        readers = [threading.Thread(target=_drain, args=(s, self.spec.output_limit, sink, over), daemon=True)
                   for s, sink in ((proc.stdout, out), (proc.stderr, err))]
        for r in readers:
            r.start()
        self._feed(proc, stdin)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        self._kill_tree(proc)
        for r in readers:
            r.join(timeout=5)
        return ExecResult(
            returncode=proc.returncode if not timed_out else -signal.SIGKILL,
            stdout=b"".join(out).decode(errors="replace"), stderr=b"".join(err).decode(errors="replace"),
            wall_s=time.perf_counter() - start, timed_out=timed_out, truncated=over[0],
            oom_killed=self._cgroup.oom_killed())

    @staticmethod
    def _feed(proc: subprocess.Popen[bytes], data: bytes | None) -> None:
        assert proc.stdin is not None
        try:
            if data:
                proc.stdin.write(data)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def _kill_tree(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        self._cgroup.kill_all()

    def _path(self, rel: str) -> Path:
        p = (self._work / rel).resolve()
        if not p.is_relative_to(self._work.resolve()):
            raise ValueError(f"{rel!r} escapes the sandbox working directory")
        return p

    def put_files(self, files: Mapping[str, bytes]) -> None:
        for rel, data in files.items():
            p = self._path(rel)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def get_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        found = {}
        for rel in paths:
            p = self._path(rel)
            if p.is_file():
                found[rel] = p.read_bytes()
        return found

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cgroup.remove()
        shutil.rmtree(self._dir, ignore_errors=True)
