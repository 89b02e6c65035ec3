"""Every Triton oracle compiles for sm_90 as Triton's launcher would compile it on an H100.

The CPU interpreter runs code the GPU compiler refuses; on the H200 that cost whole device
calls (module globals, list comprehensions, a launcher name clash, static_range bounds, shared
memory over 227 KiB). scripts/sm90_dry_launch.py binds each launch of the oracle's forward
at the CPU default shape and compiles it for sm_90 without running it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _triton_oracles() -> list[str]:
    ids = []
    for manifest in sorted((REPO / "problems").glob("*/*/*/manifest.json")):
        oracle = manifest.parent / "solutions" / "oracle.py"
        if oracle.is_file() and "triton" in oracle.read_text() and not json.loads(manifest.read_text()).get("collectives"):
            ids.append(str(manifest.parent.relative_to(REPO / "problems")))
    return ids


@pytest.mark.parametrize("problem", _triton_oracles())
def test_oracle_compiles_for_sm90(problem):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "sm90_dry_launch.py"), problem],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "compiled for sm_90" in r.stdout
