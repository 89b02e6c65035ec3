"""A candidate's nvcc build sees only what a build needs.

nvcc runs the candidate's preprocessor and assembler, which read whatever files the source
names: an `#include` of a path outside the task (the checkout, other episodes' results, a
home directory) puts its lines into the compile log the agent's tools return, and an
`.incbin` puts its bytes into the library. Nothing in a compile executes the candidate's
code, so a view of the file system that holds only the toolchain, the task's pinned sources,
our glue and the build's own folder closes it.

The view: a new mount namespace (and network and PID namespaces, a user namespace when not
root) whose root is an empty tmpfs with read-only binds of `/usr` and the symlinks to it
(`/bin`, `/lib`, ...), the dynamic loader's files of `/etc`, the CUDA toolkit if it lives
elsewhere, the pinned source roots and `translation/`; the build folder read-write; a fresh
`/proc`, `/tmp` and four device nodes. The environment is cleared (PATH, HOME, TMPDIR).
Where the host refuses the namespaces, `wrap` raises BuildIsolationError: a candidate is
never built with the orchestrator's view of the files.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Sequence

from orchestrator.errors import InfraError

# What gcc, the assembler, ld and nvcc need from /etc: the loader's cache and configuration,
# and Debian's alternatives (c++, cc). Not the rest of /etc.
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

# $1: the new root's mount point; $2: the build folder; then groups "ro PATH" / "rw PATH" /
# "link PATH TARGET" ended by "--", then the command. Runs as root of the new namespaces.
SCRIPT = r'''
set -eu
trap 'echo "popcorn-build-jail: could not set up the build'"'"'s view (exit $?)" >&2; exit 97' EXIT
root=$1; work=$2; shift 2
mount -t tmpfs -o size=16m,mode=755 popcorn-build "$root"
mkdir -p "$root/proc" "$root/tmp" "$root/dev"
mount -t proc proc "$root/proc"
mount -t tmpfs -o size=2g,mode=1777 popcorn-tmp "$root/tmp"  # before the binds: the build folder may be under /tmp
for d in null zero random urandom; do : > "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"; done
while [ "$1" != "--" ]; do
  kind=$1; path=$2; shift 2
  case $kind in
    link) mkdir -p "$root$(dirname "$path")"; ln -s "$1" "$root$path"; shift ;;
    ro|rw)
      if [ -d "$path" ]; then mkdir -p "$root$path"; else mkdir -p "$root$(dirname "$path")"; : > "$root$path"; fi
      mount --rbind "$path" "$root$path"
      if [ "$kind" = ro ]; then mount -o remount,bind,ro "$root$path"; fi ;;
  esac
done
shift
cd /
trap - EXIT
exec chroot "$root" /usr/bin/env -i PATH="$POPCORN_PATH" HOME=/tmp TMPDIR=/tmp /bin/sh -c 'cd "$0" && exec "$@"' "$work" "$@"
'''


SETUP_FAILED = 97  # the script's exit status when the view could not be made (nvcc never ran)


class BuildIsolationError(InfraError):
    """The host refused the namespaces a candidate's build runs in, or the view could not be made."""


@functools.lru_cache(maxsize=1)
def _prefix() -> tuple[str, ...] | None:
    """The unshare prefix this host allows for a build, or None."""
    unshare = shutil.which("unshare")
    if not unshare:
        return None
    base = ("--mount", "--net", "--pid", "--fork", "--kill-child")
    candidates = [(unshare, *base)] if os.geteuid() == 0 else [(unshare, "--user", "--map-root-user", *base)]
    for prefix in candidates:
        try:
            probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs none /mnt 2>/dev/null || mount -t tmpfs none /tmp"],
                                   capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix
    return None


def _binds(readable: Iterable[Path], writable: Path, toolkit: Path) -> list[str]:
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["link", path, os.readlink(path)]
        elif os.path.isdir(path):
            args += ["ro", path]
    args += [arg for path in ETC if os.path.exists(path) for arg in ("ro", path)]
    extra = [toolkit] if not str(toolkit).startswith("/usr/") else []
    for path in [*extra, *readable]:  # at the path nvcc is given (a symlinked parent stays a real folder)
        args += ["ro", str(Path(path).absolute())]
    args += ["rw", str(writable.absolute())]
    return args + ["--"]


def wrap(cmd: Sequence[str], work: Path, readable: Iterable[Path]) -> tuple[list[str], dict[str, str]]:
    """`cmd` (an nvcc command line) to run in the build's view, and the environment to run it with.
    `readable`: the folders it may read besides the system's; `work`: its folder, read-write."""
    prefix = _prefix()
    if prefix is None:
        raise BuildIsolationError("cannot build the candidate in its own file-system view: this host refuses "
                                  "mount namespaces (unshare --mount); a candidate is never built with ours")
    nvcc = Path(shutil.which(cmd[0]) or cmd[0]).resolve()
    toolkit = nvcc.parent.parent
    root = Path(os.environ.get("TMPDIR", "/tmp")) / "popcorn-build-root"  # a mount point in our namespace only
    root.mkdir(exist_ok=True)
    path = f"{nvcc.parent}:/usr/local/bin:/usr/bin:/bin"
    full = [*prefix, "sh", "-c", SCRIPT, "popcorn-build", str(root), str(work.absolute()),
            *_binds(readable, work, toolkit), *cmd]
    return full, {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "POPCORN_PATH": path}
