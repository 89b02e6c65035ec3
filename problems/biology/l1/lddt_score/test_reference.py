"""Cross-checks for biology/l1/lddt_score: a plain Python loop over residue pairs."""
import math
import random

import torch

from orchestrator.runner.shapes import stress_shapes
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


def _one_flip(shape, seed, kind, rng):
    """The reference's outputs, and the outputs had one comparison of one pair flipped, as a
    different rounding of a distance within an ulp of a threshold or the cutoff would: a
    quarter point of the pair's score, or the pair in or out of the sums."""
    pred, true, mask = case.problem.inputs(shape, seed, "cpu")
    d_t, d_p = ref.pair_distances(true), ref.pair_distances(pred)
    include, frac = ref.included(d_t, mask), ref.preserved(d_t, d_p)
    b = rng.randrange(shape["batch"])
    if kind == "threshold":
        pairs = include[b].nonzero()
    else:
        valid_pairs = ref.included(torch.zeros_like(d_t), mask)[b].bool()  # any distance under the cutoff
        pairs = (((d_t[b] - ref.CUTOFF).abs() < 1.0) & valid_pairs).nonzero()
    if len(pairs) == 0:
        return None
    i, j = pairs[rng.randrange(len(pairs))].tolist()
    flipped_frac, flipped_include = frac.clone(), include.clone()
    for a, c in ((i, j), (j, i)):  # d_ij and d_ji round alike
        if kind == "threshold":
            flipped_frac[b, a, c] += -0.25 if frac[b, i, j] > 0 else 0.25
        else:
            flipped_include[b, a, c] = 1 - include[b, i, j]
    return (pred, true, mask), ref.scores(include, frac), ref.scores(flipped_include, flipped_frac)


def test_one_rounding_flip_passes_at_stress_shapes():
    """One flip of each kind at the stress shapes up to 2**22 pair slots: the small ones are the
    hard ones, down to 16 residues, where a flip moves a score by up to 0.25 and a chain's
    global score by up to 1e-2."""
    rng, failures, trials = random.Random(0), [], 0
    for seed in range(3):
        for shape in stress_shapes(case.manifest["shapes"], case.manifest["constraints"], 8, seed):
            if shape["batch"] * shape["n_res"] ** 2 > 2 ** 22:
                continue  # CI's memory and time
            for kind in ("threshold", "cutoff"):
                for _ in range(3):
                    made = _one_flip(shape, seed, kind, rng)
                    if made is None:
                        continue
                    trials += 1
                    inputs, expected, flipped = made
                    result = case.problem.compare(inputs, flipped, expected)
                    if not result.passed:
                        failures.append((kind, shape, result.message))
    assert trials >= 60 and not failures, failures[:3]


def test_a_wrong_global_or_a_constant_per_res_fails():
    """At a small shape, where the unweighted mean of per_res is only 5e-3 from the global score
    (a fixed tolerance wide enough for one flip in a 16-residue chain let it pass)."""
    shape = {"batch": 8, "n_res": 64, "noise": 1.0}
    inputs = case.problem.inputs(shape, 0, "cpu")
    per_res, glob = ref.Model()(*inputs)
    mask = inputs[2]
    unweighted = (per_res * mask).sum(-1) / mask.sum(-1)  # not weighted by each residue's pairs
    result = case.problem.compare(inputs, (per_res, unweighted), (per_res, glob))
    assert not result.passed and "global[" in result.message
    chain_mean = glob[:, None].expand_as(per_res).contiguous()
    result = case.problem.compare(inputs, (chain_mean, glob), (per_res, glob))
    assert not result.passed and "per_res" in result.message
    one_residue_off = per_res.clone()
    one_residue_off[0, 5] += 0.2  # more than one flip of its pairs moves it
    result = case.problem.compare(inputs, (one_residue_off, glob), (per_res, glob))
    assert not result.passed and "per_res[0, 5]" in result.message
