"""`python -m orchestrator sandbox prune`: remove containers the docker backend left.

Every sandbox container carries labels (popcorn.sandbox, popcorn.run, popcorn.episode,
popcorn.owner = host:pid). A crash or SIGKILL of the orchestrator leaves its containers
running; `prune` sweeps them by label, and `prune --orphans` (what a run calls at its
start) removes only those whose owning process on this host is gone.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any

from orchestrator.errors import UserError


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    prune = sub.add_parser("prune", help="remove leftover sandbox containers (by label)")
    prune.add_argument("--run", dest="prune_run", metavar="RUN_ID", help="only this run's containers")
    prune.add_argument("--orphans", action="store_true",
                       help="only containers whose creating process on this host has exited")
    prune.add_argument("--dry-run", action="store_true", help="list, remove nothing")


def main(args: argparse.Namespace) -> int:
    from orchestrator.sandbox.base import SandboxUnavailable

    try:
        found = prune(run_id=args.prune_run, orphans_only=args.orphans, dry_run=args.dry_run)
    except SandboxUnavailable as exc:
        raise UserError(str(exc)) from exc
    verb = "would remove" if args.dry_run else "removed"
    for name in found:
        print(f"{verb} {name}")
    print(f"{verb} {len(found)} container(s)")
    return 0


def _owner_gone(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another host's (or unlabelled): not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def leftovers(client: Any, run_id: str | None = None) -> list[Any]:
    """Every sandbox container (running or not), optionally of one run."""
    from orchestrator.sandbox.docker import LABEL_RUN, LABEL_SANDBOX

    labels = [f"{LABEL_SANDBOX}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
    return list(client.containers.list(all=True, filters={"label": labels}))


def prune(run_id: str | None = None, orphans_only: bool = False, dry_run: bool = False) -> list[str]:
    """Remove sandbox containers; returns their names. Raises SandboxUnavailable (no engine)."""
    from orchestrator.sandbox.docker import LABEL_EPISODE, LABEL_OWNER, LABEL_RUN, docker_client, remove_container

    client = docker_client()
    removed = []
    try:
        for container in leftovers(client, run_id):
            labels = container.labels or {}
            if orphans_only and not _owner_gone(labels.get(LABEL_OWNER, "")):
                continue
            name = f"{container.name} (run {labels.get(LABEL_RUN)}, episode {labels.get(LABEL_EPISODE)})"
            if dry_run or remove_container(container):
                removed.append(name)
            else:
                print(f"warning: could not remove {name}", file=sys.stderr)
    finally:
        client.close()
    return removed
