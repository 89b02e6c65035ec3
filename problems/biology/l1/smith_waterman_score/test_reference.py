"""Cross-checks for biology/l1/smith_waterman_score: a scalar three-matrix Gotoh DP."""
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def gotoh_local(q: list[int], t: list[int], subst: list[list[int]], go: int, ge: int) -> int:
    """Textbook Gotoh local alignment with explicit H, E, F matrices."""
    neg = float("-inf")
    n, m = len(q), len(t)
    h = [[0] * (m + 1) for _ in range(n + 1)]
    e = [[neg] * (m + 1) for _ in range(n + 1)]
    f = [[neg] * (m + 1) for _ in range(n + 1)]
    best = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            e[i][j] = max(e[i][j - 1] - ge, h[i][j - 1] - go)
            f[i][j] = max(f[i - 1][j] - ge, h[i - 1][j] - go)
            h[i][j] = max(0, h[i - 1][j - 1] + subst[q[i - 1]][t[j - 1]], e[i][j], f[i][j])
            best = max(best, h[i][j])
    return int(best)


def scalar_scores(query, target, qlen, tlen, subst, gap_open, gap_extend):
    s = subst.tolist()
    return torch.tensor([gotoh_local(query[b, :qlen[b]].tolist(), target[b, :tlen[b]].tolist(), s,
                                     gap_open, gap_extend) for b in range(query.shape[0])], dtype=torch.int32)


def test_matches_scalar_gotoh_protein():
    case.check_against({"batch": 12, "len_q": 40, "len_t": 33, "alphabet": 20}, scalar_scores)


def test_matches_scalar_gotoh_dna():
    case.check_against({"batch": 12, "len_q": 35, "len_t": 48, "alphabet": 4}, scalar_scores)


def test_affine_gap_toy_alignment():
    # DNA +2/-3, go = 5, ge = 1: AAAAAAAA vs AAAACCCAAAA aligns 8 matches around a gap of 3
    # (16 - 5 - 2 = 9) which beats 4 matches without a gap (8).
    enc = {"A": 0, "C": 1, "G": 2, "T": 3}
    q = torch.tensor([[enc[c] for c in "AAAAAAAA"]])
    t = torch.tensor([[enc[c] for c in "AAAACCCAAAA"]])
    out = ref.Model(gap_open=5, gap_extend=1)(q, t, torch.tensor([8]), torch.tensor([11]), ref.substitution_matrix(4))
    assert out.tolist() == [9]


def test_blosum62_is_symmetric_with_positive_diagonal():
    m = ref.substitution_matrix(20)
    assert torch.equal(m, m.T) and bool((m.diagonal() > 0).all()) and int(m.sum()) == -426


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration({"batch": 256, "len_q": 128, "len_t": 128, "alphabet": 20})
