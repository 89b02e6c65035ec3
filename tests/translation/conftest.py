"""Shared fixtures: real downloads from PyPI, cached under the repository's .cache/."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT

@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """The repository cache (.cache/): pins downloaded once are reused by every test run."""
    path = REPO_ROOT / ".cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def translation_copy(tmp_path: Path) -> Path:
    """A writable copy of translation/ (tests tamper with manifests there)."""
    dest = tmp_path / "translation"
    shutil.copytree(REPO_ROOT / "translation", dest)
    return dest
