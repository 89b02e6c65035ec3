"""Which code made a record: the commit of the checkout and whether its tracked files differ."""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.config import REPO_ROOT


@functools.lru_cache(maxsize=None)  # once a process: the code it loaded does not change
def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The commit of the checkout rooted at `root`, and whether its tracked files differ from it:
    a record must not name a commit whose code did not run (an edited checkout, or a copy of
    the tree beside an older .git, as the device machine gets). None where `root` is not the
    top of a checkout: an installed copy inside some other repository is not that repository."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=30, cwd=root)
    unknown = {"git": None, "git_dirty": None}
    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != Path(root).resolve():
            return unknown
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return unknown
        changed = git("status", "--porcelain", "--untracked-files=no")
        return {"git": head.stdout.strip(), "git_dirty": bool(changed.stdout.strip()) if changed.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return unknown
