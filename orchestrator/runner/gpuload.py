"""A second process that loads the GPU while a candidate runs a correctness trial.

Some races only show when the GPU is shared: a kernel that releases a shared-memory buffer
while its own TMA store may still be reading it computes right on a quiet GPU and wrong when
another process slows its memory traffic. CUTLASS example 88's backward did exactly that (tr-fa2-bwd's H100
reference: 2,187 wrong dQ of 3,027 calls beside one loading process, 2 of about 90 trials in
lanes; docs/decisions.md, "Source fixes"). Without a load of our own, whether such a kernel
passes depended on which other evaluations happened to share the GPU. So the judges run a
few correctness trials with this load on (`loaded` trials) and record how much load ran
during each.

The load is fp32 matmuls (the SMs) and copies between two buffers larger than L2 (DRAM),
one iteration at a time so that it stops within one iteration when paused. Protocol on
stdin/stdout, one word per line: the child says `ready`; `run` -> `running` once load is on
the device; `pause` -> `paused <iterations>` once its work has finished; end of input -> exit.
Child: python -m orchestrator.runner.gpuload DEVICE MIB
"""
from __future__ import annotations

import os
import select
import subprocess
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from orchestrator.errors import InfraError

START_TIMEOUT_S = 120.0  # importing torch and creating a CUDA context on a busy host
REPLY_TIMEOUT_S = 30.0
COPY_MIB = 256  # each of two buffers: several times an H100's 50 MB L2


class GpuLoad:
    """The load process of one judge, started on first use; `with load.running() as info:`."""

    def __init__(self, device: str, mib: int = COPY_MIB) -> None:
        self.device, self.mib = device, mib
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "orchestrator.runner.gpuload", self.device, str(self.mib)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._expect("ready", START_TIMEOUT_S)

    def _send(self, word: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(word.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise self._died(f"cannot be told {word!r}: {exc}") from exc

    def _expect(self, word: str, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        if not line.startswith(word):
            raise self._died(f"did not answer {word!r} within {timeout:.0f} s (said {line!r})")
        return line

    def _died(self, what: str) -> InfraError:
        err = b""
        if self.proc is not None:
            self.proc.kill()
            err = self.proc.stderr.read()[-800:] if self.proc.stderr else b""
            self.proc = None
        tail = err.decode(errors="replace").strip().splitlines()
        return InfraError(f"the GPU load process {what}" + (f": {tail[-1]}" if tail else ""))

    @contextmanager
    def running(self) -> Iterator[dict[str, Any]]:
        """Load on for the body; afterwards `info["load_iterations"]` says how much ran."""
        if self.proc is None:
            self._start()
        self._send("run")
        self._expect("running", REPLY_TIMEOUT_S)
        info: dict[str, Any] = {}
        try:
            yield info
        finally:
            if self.proc is not None:
                self._send("pause")
                info["load_iterations"] = int(self._expect("paused", REPLY_TIMEOUT_S).split()[1])

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _serve(device: str, mib: int) -> None:
    import torch

    cuda = device.startswith("cuda")
    if not cuda:
        torch.set_num_threads(1)  # a CPU load (the tests) takes one core, not the candidate's
    side = 4096 if cuda else 256
    a = torch.randn(side, side, device=device)
    src = torch.zeros(mib << 18, device=device)  # mib MiB of fp32
    dst = torch.empty_like(src)

    def iteration() -> None:
        torch.mm(a, a)
        dst.copy_(src)
        if cuda:
            torch.cuda.synchronize()  # one iteration queued at a time: a pause ends within one

    fd, pending, running, iterations = sys.stdin.fileno(), b"", False, 0
    print("ready", flush=True)
    while True:
        if not running or select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                return
            pending += chunk
            while b"\n" in pending:
                word, pending = pending.split(b"\n", 1)
                if word == b"run":
                    running, iterations = True, 0
                    iteration()
                    print("running", flush=True)
                elif word == b"pause":
                    running = False
                    print(f"paused {iterations}", flush=True)
            continue
        iteration()
        iterations += 1


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
