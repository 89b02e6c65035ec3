"""ProblemCase.check_recorded_drift ties a manifest's recorded fp32-vs-fp64 drift to what its test measures."""
import json
from pathlib import Path

import pytest

from orchestrator.testing import ProblemCase

REPO = Path(__file__).resolve().parents[1]
case = ProblemCase.load(REPO / "problems/graph/l3/distributed_gcn_halo/test_reference.py")


def test_a_drift_far_above_the_record_fails():
    recorded = case.manifest["tolerance"]["calibration"]["fp32_vs_fp64_max_abs"]
    case.check_recorded_drift(recorded)
    with pytest.raises(AssertionError, match="measured drift"):
        case.check_recorded_drift(recorded * 5)


def test_an_unrecorded_key_fails_and_names_it():
    with pytest.raises(AssertionError, match="calibration.fp32_vs_fp64_nothing is not recorded"):
        case.check_recorded_drift(1e-7, "fp32_vs_fp64_nothing")


def test_record_mode_keeps_the_largest(tmp_path, monkeypatch):
    out = tmp_path / "drift.json"
    monkeypatch.setenv("POPCORN_RECORD_DRIFT", str(out))
    for value in (2e-7, 5e-7, 1e-7):
        case.check_recorded_drift(value)
    assert json.loads(out.read_text()) == {"graph/l3/distributed_gcn_halo": {"fp32_vs_fp64_max_abs": 5e-7}}
