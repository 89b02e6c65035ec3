"""Cross-checks for biology/l1/msa_sequence_reweighting: NumPy broadcast identity counts."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_weights(msa):
    x = msa.numpy().astype(np.int64)
    matches = (x[:, None, :] == x[None, :, :]).sum(-1)
    counts = (matches / x.shape[1] >= 0.8).sum(1)
    weights = 1.0 / counts
    return torch.from_numpy(weights), torch.tensor(weights.sum())


def test_matches_numpy():
    case.check_against({"n_seq": 300, "length": 45}, numpy_weights)


def test_threshold_is_inclusive_at_exactly_80_percent():
    msa = torch.zeros(2, 10, dtype=torch.int8)
    msa[1, :2] = 5                       # 8 of 10 identical: neighbours
    w, n_eff = ref.Model()(msa)
    assert w.tolist() == [0.5, 0.5] and float(n_eff) == 1.0
    msa[1, 2] = 5                        # 7 of 10: not neighbours
    w, n_eff = ref.Model()(msa)
    assert w.tolist() == [1.0, 1.0] and float(n_eff) == 2.0


def test_families_give_spread_weights():
    w, n_eff = ref.Model()(*case.problem.inputs({"n_seq": 512, "length": 64}, 0, "cpu"))
    assert float(w.min()) < 0.2 and float(w.max()) == 1.0 and 30 < float(n_eff) < 500


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"n_seq": 2048, "length": 128})
