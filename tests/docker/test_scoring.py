"""Score the oracle of a real problem inside its per-problem container, on the CPU,
the way the scoring pipeline does: put the problem folder and the solution into the
work dir, run `python -m orchestrator.runner.judge` with a JSON job on stdin."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT

from .conftest import PROBLEM, RUN_ID

pytestmark = pytest.mark.docker


def problem_files(problem_id: str) -> dict[str, bytes]:
    folder = REPO_ROOT / "problems" / problem_id
    files = {}
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and rel.parts[0] not in ("solutions", "__pycache__") and not rel.name.startswith("test_"):
            files[f"problem/{rel.as_posix()}"] = path.read_bytes()
    return files


def score_oracle(lock: Path, problem_id: str = PROBLEM, device: str = "cpu", gpus: tuple[int, ...] = (),
                 stress: int = 1) -> dict:
    from orchestrator.images import resolve_image
    from orchestrator.runner.judge import parse_verdict
    from orchestrator.sandbox.base import SandboxSpec, create

    ref, digest = resolve_image(problem_id, lock)
    oracle = (REPO_ROOT / "problems" / problem_id / "solutions" / "oracle.py").read_bytes()
    nonce = os.urandom(16).hex()
    timing = {"iters_cpu": 1, "warmup": 0, "input_sets": 1, "hold_bytes": 1 << 20} if device == "cpu" else {}
    job = {"problem_dir": "/work/problem", "solution": "/work/solution.py", "device": device, "mode": "full",
           "seed": 1234, "stress": stress, "trials": 3, "nonce": nonce, "timing": timing}
    with create("docker", SandboxSpec(image=ref, run_id=RUN_ID, episode=f"score-{problem_id}", gpus=gpus,
                                      memory_bytes=(6 << 30) if device == "cpu" else (64 << 30),
                                      cpus=2.0 if device == "cpu" else 8.0)) as sandbox:
        sandbox.put_files({**problem_files(problem_id), "solution.py": oracle})
        result = sandbox.exec([sandbox.python, "-m", "orchestrator.runner.judge"], timeout_s=900,
                              stdin=json.dumps(job).encode())
        sandbox_digest = sandbox.image_digest
    verdict = parse_verdict(result.stdout, nonce)
    assert verdict is not None, result.stderr[-3000:]
    return {"image_ref": ref, "image_digest": digest, "verdict": verdict, "wall_s": result.wall_s,
            "isolation": sandbox.isolation, "sandbox_image_digest": sandbox_digest}


def test_oracle_passes_inside_its_problem_container(built):
    scored = score_oracle(built)
    verdict = scored["verdict"]
    assert verdict["failure_class"] is None, verdict.get("failure_detail")
    assert {k: v["status"] for k, v in verdict["stages"].items()} == {
        "load": "passed", "correctness": "passed", "stress": "passed", "timing": "passed"}
    assert scored["image_digest"].startswith("sha256:")
