"""Every hack fixture in tests/hacks/ is refused for the right reason.

Each fixture's first line says what must happen: `# expect: <class> [text]`, where
<class> is a failure class (or `passed` for the control) and `text` must appear in
the failure detail or the flags. Fixtures marked `runtime-only` run with the static
analyzer bypassed, to prove the run-time defence on its own; `gpu-only` ones need CUDA.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from orchestrator.catalog import find
from orchestrator.config import Settings
from orchestrator.scoring.pipeline import evaluate

HACKS = Path(__file__).parent / "hacks"
FIXTURES = sorted(HACKS.glob("*.py"))


def expectation(path: Path) -> tuple[str, str, bool, bool]:
    lines = path.read_text().splitlines()
    head = lines[0].removeprefix("# expect:").split()
    second = lines[1] if len(lines) > 1 else ""
    return head[0], head[1] if len(head) > 1 else "", "runtime-only" in second, "gpu-only" in second


@pytest.fixture(scope="module")
def settings() -> Settings:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return Settings(device=device, sandbox="local", stress=2, trial_timeout_s=30, timing_iters=10, timing_iters_cpu=2)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_hack_is_refused(fixture: Path, settings: Settings) -> None:
    expected, text, runtime_only, gpu_only = expectation(fixture)
    if gpu_only and settings.device != "cuda":
        pytest.skip("needs a GPU")
    entry = find(settings, "graph/l1/csr_spmv")
    record = evaluate(entry, fixture, settings, static_checks=not runtime_only)
    detail = f"{record['failure_class']}: {record['failure_detail'][:800]} flags={record['flags']}"
    if expected == "passed":
        assert record["status"] == "passed", detail
        return
    assert record["status"] == "failed", detail
    assert record["failure_class"] == expected, detail
    assert text in record["failure_detail"] or text in record["flags"], detail
    assert record["speedup"] is None
