"""The problem images carry only the runner (orchestrator/__init__.py and orchestrator/runner,
images.RUNNER_FILES): every runner module must import from that copy alone. A runner module that
imported orchestrator.errors passed every test here, where the whole package is installed, and
failed inside the containers (tests/docker, nineteenth session)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from orchestrator.config import REPO_ROOT
from orchestrator.images import RUNNER_FILES

CHECK = """
import importlib, pkgutil, sys
# the editable install's finder would resolve any orchestrator module from the repository
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")]
sys.path.insert(0, sys.argv[1])
import orchestrator.runner as runner
assert runner.__file__.startswith(sys.argv[1]), runner.__file__
for m in pkgutil.iter_modules(runner.__path__):
    try:
        importlib.import_module("orchestrator.runner." + m.name)
    except ImportError as exc:
        print(f"{m.name}: {exc}")
"""


def test_every_runner_module_imports_from_the_images_copy_alone(tmp_path: Path) -> None:
    for item in RUNNER_FILES:
        src, dest = REPO_ROOT / item, tmp_path / item
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(src, dest)
    proc = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "", proc.stdout
