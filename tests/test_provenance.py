"""Records name the code that made them: the commit, and whether the tracked files differ from it."""
from __future__ import annotations

import subprocess
from pathlib import Path

from orchestrator.agent.run import versions
from orchestrator.provenance import git_state


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   cwd=repo, check=True, capture_output=True)


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "pkg/mod.py")
    _git(repo, "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    return repo, head


def test_a_clean_checkout_names_its_commit(tmp_path):
    repo, head = _repo(tmp_path)
    (repo / "pkg" / "notes.txt").write_text("untracked files are not the code that ran\n")
    assert git_state(repo) == {"git": head, "git_dirty": False}


def test_an_edited_tracked_file_marks_the_commit_dirty(tmp_path):
    repo, head = _repo(tmp_path)
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    assert git_state(repo) == {"git": head, "git_dirty": True}


def test_a_tree_beside_an_older_git_is_dirty(tmp_path):
    # the device machine's case: the working tree is newer than the .git that came with it
    repo, first = _repo(tmp_path)
    (repo / "pkg" / "mod.py").write_text("x = 3\n")
    _git(repo, "commit", "-q", "-am", "second")
    _git(repo, "update-ref", "HEAD", first)  # HEAD back at the first commit, the tree at the second's
    assert git_state(repo) == {"git": first, "git_dirty": True}


def test_outside_any_checkout_there_is_no_commit(tmp_path):
    assert git_state(tmp_path) == {"git": None, "git_dirty": None}


def test_a_copy_installed_inside_another_repository_names_no_commit(tmp_path):
    # e.g. site-packages in a virtual environment inside someone's project: not our checkout
    repo, _ = _repo(tmp_path)
    (repo / "pkg" / "mod.py").write_text("x = 4\n")
    assert git_state(repo / "pkg") == {"git": None, "git_dirty": None}


def test_versions_carry_the_git_state():
    got = versions()
    assert set(got) >= {"git", "git_dirty"}
    assert got["git"] is None or len(got["git"]) == 40
