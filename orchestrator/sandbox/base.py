"""The one seam for sandboxes: `Sandbox` (exec, put_files, get_files, close).

Backends register by name (`local`, `docker`) with `@register`. A non-zero exit, a
timeout or an output over the limit is data in `ExecResult`, never an exception:
those are the model's doing. An exception means the sandbox itself failed
(`SandboxUnavailable`: engine gone, image missing, GPU lost) and is recorded as
infra_error, never charged to the model.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Mapping, Sequence

DEFAULT_OUTPUT_LIMIT = 1 << 20  # bytes of stdout and of stderr kept per exec


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    truncated: bool = False     # output was longer than the limit and was cut
    oom_killed: bool = False    # the memory limit killed it (where the backend can tell)

    @property
    def success(self) -> bool:
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox is created with. Backends ignore what they cannot honour and say
    so in `isolation` (see Sandbox.isolation)."""

    run_id: str = "adhoc"
    episode: str = "adhoc"
    image: str | None = None               # docker: image reference (tag or digest)
    gpus: Sequence[int] = ()               # GPU indices; () = CPU only
    memory_bytes: int = 16 << 30
    pids: int = 512
    cpus: float = 2.0
    file_size_bytes: int = 4 << 30
    shm_bytes: int = 1 << 30               # multi-GPU tasks: large /dev/shm for NCCL
    network: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # extra variables (never secrets)
    output_limit: int = DEFAULT_OUTPUT_LIMIT


class SandboxError(Exception):
    """Base of sandbox failures."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot run commands (engine gone, image missing, setup failed): infra."""


class Sandbox(abc.ABC):
    """An isolated place to run untrusted commands, with a working directory.

    Paths given to put_files/get_files are relative to the working directory
    (`workdir`), which is writable and allows executing built binaries.
    """

    name: ClassVar[str]

    def __init__(self, spec: SandboxSpec):
        self.spec = spec

    @property
    @abc.abstractmethod
    def workdir(self) -> str:
        """Absolute path of the working directory as seen inside the sandbox."""

    @property
    def python(self) -> str:
        """The Python interpreter to call inside the sandbox (it has torch and the runner)."""
        return "python3"

    @property
    def isolation(self) -> dict[str, object]:
        """What this backend enforces (network, pids, memory, user, ...), for the record."""
        return {}

    @abc.abstractmethod
    def exec(self, cmd: Sequence[str], *, timeout_s: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        """Run `cmd` (argv) and wait at most `timeout_s` seconds, then kill all it started.

        Raises:
            SandboxUnavailable: the sandbox itself failed (not the command).
        """

    @abc.abstractmethod
    def put_files(self, files: Mapping[str, bytes]) -> None:
        """Write files (relative path -> bytes) into the working directory.

        Raises:
            SandboxUnavailable: the sandbox itself failed.
        """

    @abc.abstractmethod
    def get_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        """Read files from the working directory; missing files are left out.

        Raises:
            SandboxUnavailable: the sandbox itself failed.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Stop everything and remove the sandbox. Idempotent; never raises."""

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_BACKENDS: dict[str, Callable[[SandboxSpec], Sandbox]] = {}


def register(name: str) -> Callable[[type[Sandbox]], type[Sandbox]]:
    def wrap(cls: type[Sandbox]) -> type[Sandbox]:
        cls.name = name
        _BACKENDS[name] = cls
        return cls
    return wrap


def backends() -> list[str]:
    _load_builtin()
    return sorted(_BACKENDS)


def create(name: str, spec: SandboxSpec) -> Sandbox:
    """Create a sandbox of backend `name` ('local', 'docker' or 'auto')."""
    _load_builtin()
    if name == "auto":
        name = "docker" if "docker" in _BACKENDS and _docker_answers() else "local"
    if name not in _BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r} (known: {', '.join(sorted(_BACKENDS))})")
    return _BACKENDS[name](spec)


def _docker_answers() -> bool:
    try:
        from orchestrator.sandbox.docker import engine_available
    except ImportError:
        return False
    return engine_available()


def _load_builtin() -> None:
    import importlib

    for mod in ("orchestrator.sandbox.local", "orchestrator.sandbox.docker"):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass


def thread_env(cpus: float) -> dict[str, str]:
    """Thread pools sized to the sandbox's CPUs: torch and OpenMP otherwise start one thread
    per host core in every process, and a dozen evaluations on one host thrash it."""
    n = str(max(1, round(cpus)))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n}
