"""The `docker` sandbox backend: one hardened, long-lived container per sandbox.

The container runs `sleep infinity` under an init process; every tool call is a
`docker exec`. Hardening (see docs/containers.md): no network, read-only root, a
tmpfs work directory mounted with exec, a non-root user, all capabilities dropped,
no-new-privileges, the engine's default seccomp profile, pids/memory/CPU limits,
per-call time limits enforced twice (`timeout -k` inside, and a host-side kill of
the exec's process group and of every stray process after a grace period), output
capped, labels on every container and removal on every path (close, interpreter
exit, and `python -m orchestrator sandbox prune` after a crash).

Files move as a tar stream over exec: `docker cp`/put_archive do not see tmpfs mounts.
"""
from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import socket
import struct
import tarfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Mapping, Sequence

from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.sandbox.base import ExecResult, Sandbox, SandboxSpec, SandboxUnavailable, register, thread_env

LABEL_RUN = "popcorn.run"
LABEL_EPISODE = "popcorn.episode"
LABEL_OWNER = "popcorn.owner"          # "<hostname>:<pid>" of the creating process
LABEL_SANDBOX = "popcorn.sandbox"      # marks every container this backend made
WORKDIR = "/work"
SANDBOX_USER = "1000:1000"             # the image's `popcorn` user; never root
KILL_GRACE_S = 5                       # `timeout -k`: SIGTERM, then SIGKILL after this
HOST_MARGIN_S = 3                      # host kills this long after the inner timeout gave up
FILES_READ_LIMIT = 1 << 30             # get_files: bytes of tar read back at most
TMP_BYTES = 1 << 30                    # /tmp (HOME, compiler caches) tmpfs size
NVIDIA_CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                        "/dev/nvidia-modeset")


class DockerSettings(BaseSettings):
    """Backend settings from POPCORN_DOCKER_* variables, read when a sandbox is created."""

    model_config = SettingsConfigDict(env_prefix="POPCORN_DOCKER_", extra="ignore")

    # toolkit: device requests (nvidia-container-toolkit); devices: the fallback for hosts
    # without the toolkit (--device /dev/nvidia* and read-only binds of the driver);
    # auto: toolkit when the engine lists an `nvidia` runtime, else devices.
    gpu_mode: Literal["auto", "toolkit", "devices"] = "auto"
    # extra read-only binds "HOST[:CONTAINER],..." (devices mode: driver libraries; a host
    # whose image is a bare skeleton also binds /usr and /opt here)
    binds: str = ""
    python: str = "python3"
    ld_library_path: str | None = None   # set in the container when given
    # host variables copied into every container when set: safety switches only, never
    # secrets (NVLink multicast off: it can wedge a shared host's GPUs)
    pass_env: str = "NCCL_NVLS_ENABLE,TORCH_SYMM_MEM_DISABLE_MULTICAST,NVSHMEM_DISABLE_NVLS"


def engine_available(timeout_s: float = 3.0) -> bool:
    """True when a Docker engine answers a ping (used by create('auto'))."""
    try:
        import docker

        client = docker.from_env(timeout=timeout_s)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def docker_client(timeout_s: float = 120.0) -> Any:
    """A docker SDK client, or SandboxUnavailable naming the engine that did not answer."""
    try:
        import docker

        client = docker.from_env(timeout=timeout_s)
        client.ping()
        return client
    except Exception as exc:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxUnavailable(f"no Docker engine answers at {host}: {exc}") from exc


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class _RawExec:
    returncode: int
    stdout: bytes
    stderr: bytes
    wall_s: float
    timed_out: bool
    truncated: bool


# Containers this process made and has not removed yet: removed at interpreter exit.
_LIVE: "weakref.WeakValueDictionary[str, DockerSandbox]" = weakref.WeakValueDictionary()


@atexit.register
def _remove_live_containers() -> None:
    for sandbox in list(_LIVE.values()):
        sandbox.close()


@register("docker")
class DockerSandbox(Sandbox):
    """A sandbox in one container; see the module docstring for what it enforces."""

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        if not spec.image:
            raise SandboxUnavailable("docker sandbox: no image given (SandboxSpec.image; "
                                     "orchestrator.images.resolve_image(problem_id, lock) gives it)")
        self.settings = DockerSettings()
        self._client = docker_client()
        self._api = self._client.api
        self._container: Any = None
        self.image_digest: str = ""
        self._keep_pids: set[int] = set()
        self._closed = False
        self._lock = threading.Lock()
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # -- life cycle ---------------------------------------------------------------

    def _start(self) -> None:
        import docker.errors

        try:
            image = self._client.images.get(self.spec.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(
                f"image {self.spec.image} is not on this engine: build it (make images) or pull it "
                f"(python -m orchestrator images pull --lock FILE)") from exc
        except docker.errors.APIError as exc:
            raise SandboxUnavailable(f"docker engine error looking up {self.spec.image}: {exc}") from exc
        # what a result records: the reference by digest when given one, else the image id
        # (the digest of its config: the same after a push and a pull, on any engine)
        self.image_digest = self.spec.image if "@sha256:" in self.spec.image else str(image.id)
        try:
            self._container = self._client.containers.create(**self.create_kwargs())
            _LIVE[self._container.id] = self
            self._container.start()
            self._container.reload()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"cannot start a container from {self.spec.image}: {exc}") from exc
        state = self._container.attrs["State"]
        if not state.get("Running"):
            raise SandboxUnavailable(f"container from {self.spec.image} exited at once: {state}")
        # init and its `sleep infinity`: everything else is a stray after a timeout. Wait
        # for the sleep to exist, or a later stray sweep would kill it (and the container).
        init_pid = int(state["Pid"])
        for _ in range(100):
            children = {pid for pid, ppid, _ in self._processes() if ppid == init_pid}
            if children:
                break
            time.sleep(0.02)
        self._keep_pids = {init_pid} | children

    def create_kwargs(self) -> dict[str, Any]:
        """The container's configuration: every hardening flag is set here."""
        spec = self.spec
        tmpfs_opts = f"rw,exec,nosuid,nodev,uid=1000,gid=1000,mode=0700"
        kwargs: dict[str, Any] = dict(
            image=spec.image,
            entrypoint=["sleep", "infinity"],
            command=[],
            init=True,
            detach=True,
            user=SANDBOX_USER,
            working_dir=WORKDIR,
            hostname="sandbox",
            network_mode="bridge" if spec.network else "none",
            read_only=True,
            tmpfs={WORKDIR: f"{tmpfs_opts},size={spec.file_size_bytes}",
                   "/tmp": f"{tmpfs_opts},size={TMP_BYTES}"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],  # seccomp: the engine's default profile applies
            pids_limit=spec.pids,
            mem_limit=spec.memory_bytes,
            memswap_limit=spec.memory_bytes,   # no swap: a memory bomb is killed, not slowed
            nano_cpus=int(min(spec.cpus, self._host_cpus()) * 1e9),  # the engine refuses more than it has
            shm_size=spec.shm_bytes,
            ulimits=[_ulimit("fsize", spec.file_size_bytes), _ulimit("core", 0)],
            environment=self._environment(),
            labels={LABEL_SANDBOX: "1", LABEL_RUN: spec.run_id, LABEL_EPISODE: spec.episode,
                    LABEL_OWNER: owner_label()},
        )
        binds = _parse_binds(self.settings.binds)
        if binds:
            kwargs["volumes"] = {host: {"bind": inside, "mode": "ro"} for host, inside in binds}
        if spec.gpus:
            self._add_gpus(kwargs)
        return kwargs

    def _host_cpus(self) -> float:
        try:
            return float(self._client.info().get("NCPU") or os.cpu_count() or 1)
        except Exception:
            return float(os.cpu_count() or 1)

    def _environment(self) -> dict[str, str]:
        # Built from scratch: nothing of the host's environment (API keys) goes in.
        env = {"HOME": "/tmp", "TMPDIR": "/tmp", "USER": "popcorn", "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
               "TRITON_CACHE_DIR": "/tmp/triton", "TORCH_EXTENSIONS_DIR": "/tmp/torch_extensions",
               # NVLink multicast can take a shared host's GPUs out of service: never on
               "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
               **thread_env(self.spec.cpus)}
        if self.settings.ld_library_path:
            env["LD_LIBRARY_PATH"] = self.settings.ld_library_path
        for name in filter(None, (n.strip() for n in self.settings.pass_env.split(","))):
            if name in os.environ and not _looks_secret(name):
                env[name] = os.environ[name]
        env.update(self.spec.env)
        return env

    def _add_gpus(self, kwargs: dict[str, Any]) -> None:
        import docker.types

        ids = [str(i) for i in self.spec.gpus]
        # NCCL between ranks in one container needs a large /dev/shm and pinned memory
        kwargs["ulimits"].append(_ulimit("memlock", -1))
        if self._gpu_mode() == "toolkit":
            kwargs["device_requests"] = [
                docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu", "compute", "utility"]])]
            return
        # Fallback without nvidia-container-toolkit: device nodes and the driver read-only.
        nodes = [f"/dev/nvidia{i}" for i in ids] + [n for n in NVIDIA_CONTROL_NODES if os.path.exists(n)]
        kwargs["devices"] = [f"{n}:{n}:rwm" for n in nodes]
        if not self.settings.binds:
            kwargs["volumes"] = {host: {"bind": inside, "mode": "ro"} for host, inside in _parse_binds(_driver_binds())}
        if "LD_LIBRARY_PATH" not in kwargs["environment"] and os.path.isdir("/usr/local/nvidia"):
            kwargs["environment"]["LD_LIBRARY_PATH"] = "/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
        # Triton finds libcuda with /sbin/ldconfig, which a bare root bound to the host's
        # /usr lacks (seen on the H200: every Triton launch failed): name the folder instead.
        libcuda = _libcuda_dir()
        if libcuda and "TRITON_LIBCUDA_PATH" not in kwargs["environment"]:
            kwargs["environment"]["TRITON_LIBCUDA_PATH"] = libcuda

    def _gpu_mode(self) -> str:
        if self.settings.gpu_mode != "auto":
            return self.settings.gpu_mode
        runtimes = self._client.info().get("Runtimes") or {}
        return "toolkit" if "nvidia" in runtimes else "devices"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        container, self._container = self._container, None
        if container is not None:
            remove_container(container)
            _LIVE.pop(container.id, None)
        with contextlib.suppress(Exception):
            self._client.close()

    # -- interface --------------------------------------------------------------

    @property
    def workdir(self) -> str:
        return WORKDIR

    @property
    def python(self) -> str:
        return self.settings.python

    @property
    def image(self) -> str | None:
        """The image reference this sandbox runs (SandboxSpec.image)."""
        return self.spec.image

    @property
    def container_id(self) -> str | None:
        return None if self._container is None else self._container.id

    @property
    def isolation(self) -> dict[str, object]:
        spec = self.spec
        return {"backend": "docker", "image": spec.image, "network": spec.network,
                "read_only_root": True, "user": SANDBOX_USER, "cap_drop": "ALL",
                "no_new_privileges": True, "seccomp": "default", "pids": spec.pids,
                "memory_bytes": spec.memory_bytes, "cpus": spec.cpus, "gpus": list(spec.gpus),
                "gpu_mode": self._gpu_mode() if spec.gpus else None}

    def exec(self, cmd: Sequence[str], *, timeout_s: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        oom_before = self._oom_kills()
        raw = self._exec_raw(cmd, timeout_s=timeout_s, stdin=stdin, env=env, cwd=cwd,
                             limit=self.spec.output_limit)
        oom = False
        if raw.returncode in (137, -9) and not raw.timed_out:
            oom = self._oom_happened(oom_before)
        return ExecResult(returncode=raw.returncode, stdout=raw.stdout.decode("utf-8", "replace"),
                          stderr=raw.stderr.decode("utf-8", "replace"), wall_s=raw.wall_s,
                          timed_out=raw.timed_out, truncated=raw.truncated, oom_killed=oom)

    def put_files(self, files: Mapping[str, bytes]) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for rel, data in files.items():
                info = tarfile.TarInfo(_safe_relpath(rel))
                info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
                tar.addfile(info, io.BytesIO(data))
        raw = self._exec_raw(["tar", "-x", "-f", "-", "-C", WORKDIR, "--no-same-owner"],
                             timeout_s=120, stdin=buf.getvalue(), limit=1 << 16)
        if raw.returncode != 0:
            raise SandboxUnavailable(f"put_files into {self._short_id()} failed "
                                     f"(exit {raw.returncode}): {raw.stderr.decode(errors='replace').strip()}")

    def get_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        wanted = [_safe_relpath(p) for p in paths]
        if not wanted:
            return {}
        raw = self._exec_raw(["tar", "-c", "-f", "-", "--ignore-failed-read", "-C", WORKDIR, "--", *wanted],
                             timeout_s=120, limit=FILES_READ_LIMIT)
        if raw.truncated:
            raise SandboxUnavailable(f"get_files from {self._short_id()}: more than {FILES_READ_LIMIT} bytes")
        out: dict[str, bytes] = {}
        try:
            with tarfile.open(fileobj=io.BytesIO(raw.stdout), mode="r:") as tar:
                for member in tar:
                    name = member.name.rstrip("/")
                    if member.isfile() and name in wanted:
                        extracted = tar.extractfile(member)
                        if extracted is not None:
                            out[name] = extracted.read()
        except tarfile.TarError as exc:
            if raw.stdout:  # an empty stream means nothing existed
                raise SandboxUnavailable(f"get_files from {self._short_id()}: bad tar stream: {exc}") from exc
        return out

    # -- exec machinery ---------------------------------------------------------

    def _exec_raw(self, cmd: Sequence[str], *, timeout_s: float, stdin: bytes | None = None,
                  env: Mapping[str, str] | None = None, cwd: str | None = None,
                  limit: int) -> _RawExec:
        import docker.errors

        if self._container is None:
            raise SandboxUnavailable("docker sandbox is closed")
        inner = ["timeout", "-k", f"{KILL_GRACE_S}s", f"{max(timeout_s, 0.001):.3f}s", *cmd]
        start = time.monotonic()
        try:
            exec_id = self._api.exec_create(self._container.id, inner, stdin=stdin is not None,
                                            user=SANDBOX_USER, environment=dict(env or {}),
                                            workdir=cwd or WORKDIR)["Id"]
            sock = self._api.exec_start(exec_id, socket=True)
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"docker exec in {self._short_id()} failed: {exc}") from exc
        raw_sock: socket.socket = getattr(sock, "_sock", sock)
        deadline = start + timeout_s + KILL_GRACE_S + HOST_MARGIN_S
        host_killed = False
        try:
            if stdin is not None:
                _send_all(raw_sock, stdin, deadline)
            with contextlib.suppress(OSError):
                raw_sock.shutdown(socket.SHUT_WR)
            streams, truncated, finished = _read_frames(raw_sock, deadline, limit)
        finally:
            with contextlib.suppress(Exception):
                sock.close()
        if not finished:
            # The inner timeout did not end it (escaped its process group, or the exec
            # is wedged): kill it from the host.
            host_killed = True
            self._kill_exec(exec_id)
        wall = time.monotonic() - start
        returncode = self._exit_code(exec_id)
        timed_out = host_killed or returncode == 124 or (returncode in (137, -9) and wall >= timeout_s)
        if timed_out:
            self._kill_strays()
        return _RawExec(returncode, streams[1], streams[2], wall, timed_out, truncated)

    def _exit_code(self, exec_id: str) -> int:
        for _ in range(100):
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return -9 if code is None else int(code)
            time.sleep(0.05)
        return -9

    def _kill_exec(self, exec_id: str) -> None:
        with contextlib.suppress(Exception):
            pid = int(self._api.exec_inspect(exec_id).get("Pid") or 0)
            if pid > 0:
                # `timeout` made itself a process-group leader: the group is the call.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self._kill_strays()

    def _kill_strays(self) -> None:
        """Kill every process in the container but init and its sleep (host PIDs from `top`)."""
        for _ in range(20):
            strays = [pid for pid, _, _ in self._processes() if pid not in self._keep_pids]
            if not strays:
                return
            for pid in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def _processes(self) -> list[tuple[int, int, str]]:
        try:
            top = self._container.top(ps_args="-o pid,ppid,args")
        except Exception:
            return []
        return [(int(p[0]), int(p[1]), p[2]) for p in top.get("Processes") or []]

    def _oom_kills(self) -> int | None:
        """The container cgroup's oom_kill counter, where this host exposes it."""
        if self._container is None:
            return None
        cid = self._container.id
        for path in (f"/sys/fs/cgroup/memory/docker/{cid}/memory.oom_control",
                     f"/sys/fs/cgroup/docker/{cid}/memory.events",
                     f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.events"):
            with contextlib.suppress(OSError, ValueError):
                for line in Path(path).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return None

    def _oom_happened(self, before: int | None) -> bool:
        after = self._oom_kills()
        if before is not None and after is not None:
            return after > before
        with contextlib.suppress(Exception):
            self._container.reload()
            return bool(self._container.attrs["State"].get("OOMKilled"))
        return False

    def _short_id(self) -> str:
        return f"container {self._container.id[:12]}" if self._container is not None else "closed sandbox"


def remove_container(container: Any) -> bool:
    """Force-remove a container (kill, then remove); True when it is gone. Never raises."""
    import docker.errors

    for _ in range(3):
        try:
            container.remove(force=True)
            return True
        except docker.errors.NotFound:
            return True
        except Exception:
            time.sleep(0.5)
    return False


def _ulimit(name: str, value: int) -> Any:
    import docker.types

    return docker.types.Ulimit(name=name, soft=value, hard=value)


def _libcuda_dir() -> str | None:
    """The host folder holding the driver's libcuda.so.1 (bound into fallback-mode GPU containers)."""
    for folder in ("/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib"):
        if os.path.exists(os.path.join(folder, "libcuda.so.1")):
            return folder
    return None


def _parse_binds(text: str) -> list[tuple[str, str]]:
    binds = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        host, _, inside = item.partition(":")
        binds.append((host, inside or host))
    return binds


def _driver_binds() -> str:
    """Devices mode without POPCORN_DOCKER_BINDS: the host's driver libraries, read-only."""
    if os.path.isdir("/usr/local/nvidia"):
        return "/usr/local/nvidia"
    found = []
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu"):
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                if name.startswith(("libcuda.so", "libnvidia-")):
                    found.append(f"{folder}/{name}:/usr/local/nvidia/lib64/{name}")
    return ",".join(found)


def _looks_secret(name: str) -> bool:
    return any(word in name.upper() for word in ("KEY", "TOKEN", "SECRET", "PASSWORD", "SEED"))


def _safe_relpath(rel: str) -> str:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(f"sandbox paths are relative to the work dir, without '..': {rel!r}")
    return str(path)


def _send_all(sock: socket.socket, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            sent = sock.send(view[:1 << 16])
        except (socket.timeout, BrokenPipeError, ConnectionResetError):
            return  # the command stopped reading (or timed out): its exit status tells
        view = view[sent:]


def _read_frames(sock: socket.socket, deadline: float, limit: int) -> tuple[dict[int, bytes], bool, bool]:
    """Read docker's multiplexed exec stream until EOF or `deadline`.

    Returns ({1: stdout, 2: stderr}, truncated, finished). Output past `limit` bytes per
    stream is read and dropped so the command never blocks on a full pipe.
    """
    kept = {1: bytearray(), 2: bytearray()}
    truncated = False
    while True:
        header = _recv_exact(sock, 8, deadline)
        if header is None:
            return {k: bytes(v) for k, v in kept.items()}, truncated, False
        if not header:
            return {k: bytes(v) for k, v in kept.items()}, truncated, True
        stream, size = header[0], struct.unpack(">I", header[4:])[0]
        payload = _recv_exact(sock, size, deadline)
        if payload is None:
            return {k: bytes(v) for k, v in kept.items()}, truncated, False
        buf = kept.get(stream, kept[2])
        room = limit - len(buf)
        if len(payload) > room:
            truncated = True
        if room > 0:
            buf += payload[:room]


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes | None:
    """n bytes; b'' at a clean EOF before any byte; None when the deadline passed."""
    chunks = bytearray()
    while len(chunks) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(n - len(chunks), 1 << 20))
        except socket.timeout:
            return None
        except (ConnectionResetError, OSError):
            chunk = b""
        if not chunk:
            return bytes(chunks) if chunks else b""
        chunks += chunk
    return bytes(chunks)
