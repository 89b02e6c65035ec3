"""Cross-checks for biology/l1/lddt_score: a plain Python loop over residue pairs."""
import math

import pytest
import torch

from orchestrator.runner.compare import compare_outputs
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def python_lddt(pred, true, mask):
    per_res, glob = [], []
    for p, t, m in zip(pred.double().tolist(), true.double().tolist(), mask.tolist()):
        rows, tot_num, tot_den = [], 0.0, 0.0
        for i in range(len(p)):
            num = den = 0.0
            for j in range(len(p)):
                d_t = math.dist(t[i], t[j])
                if i != j and m[i] and m[j] and d_t < 15.0:
                    err = abs(d_t - math.dist(p[i], p[j]))
                    num += 0.25 * sum(err < tau for tau in (0.5, 1.0, 2.0, 4.0))
                    den += 1
            rows.append((1e-10 + num) / (1e-10 + den))
            tot_num, tot_den = tot_num + num, tot_den + den
        per_res.append(rows)
        glob.append((1e-10 + tot_num) / (1e-10 + tot_den))
    return torch.tensor(per_res), torch.tensor(glob)


def test_matches_python_loop():
    case.check_against({"batch": 2, "n_res": 40, "noise": 1.5}, python_lddt)


def test_perfect_prediction_scores_one():
    _, true, mask = case.problem.inputs({"batch": 2, "n_res": 50, "noise": 1.0}, 0, "cpu")
    per_res, glob = ref.Model()(true, true, mask)
    assert torch.all(per_res[mask.bool()] == 1.0) and torch.all(glob == 1.0)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"batch": 16, "n_res": 512, "noise": 1.0})


def _with_one_flip(per_res, glob, mask, true):
    """The outputs as if one pair (0, 1) of chain 0 flipped a threshold: a quarter point off
    in residue 0, residue 1 and chain 0's global score, nothing else."""
    d_t = ref.pair_distances(true)
    include = (d_t < ref.CUTOFF).float() * mask[:, :, None] * mask[:, None, :] * (1 - torch.eye(mask.shape[1]))
    per_res, glob = per_res.clone(), glob.clone()
    per_res[0, :2] -= 0.25 / include[0, :2].sum(-1)
    glob[0] -= 0.25 / include[0].sum()
    return per_res, glob


@pytest.mark.parametrize("shape", [{"batch": 1, "n_res": 16, "noise": 0.1}, {"batch": 8, "n_res": 64, "noise": 1.0}])
def test_one_threshold_flip_passes_at_any_size(shape):
    pred, true, mask = case.problem.inputs(shape, 0, "cpu")
    per_res, glob = ref.Model()(pred, true, mask)
    result = compare_outputs(_with_one_flip(per_res, glob, mask, true), (per_res, glob), case.tolerance)
    assert result.passed, result.message


def test_a_wrong_global_or_a_constant_per_res_fails():
    shape = {"batch": 8, "n_res": 64, "noise": 1.0}
    pred, true, mask = case.problem.inputs(shape, 0, "cpu")
    per_res, glob = ref.Model()(pred, true, mask)
    unweighted = (per_res * mask).sum(-1) / mask.sum(-1)  # not weighted by each residue's pairs
    result = compare_outputs((per_res, unweighted), (per_res, glob), case.tolerance)
    assert not result.passed and "output[1]" in result.message
    chain_mean = glob[:, None].expand_as(per_res)
    result = compare_outputs((chain_mean, glob), (per_res, glob), case.tolerance)
    assert not result.passed and "output[0]" in result.message
