"""Cross-checks for biology/l2/needleman_wunsch_traceback: scalar Gotoh with explicit traceback, replayed scores."""
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
NEG = float("-inf")


def gotoh_global(q, t, s, go, ge):
    n, m = len(q), len(t)
    H = [[NEG] * (m + 1) for _ in range(n + 1)]
    E = [[NEG] * (m + 1) for _ in range(n + 1)]
    F = [[NEG] * (m + 1) for _ in range(n + 1)]
    H[0][0] = 0
    for i in range(1, n + 1):
        H[i][0] = -(go + (i - 1) * ge)
    for j in range(1, m + 1):
        H[0][j] = -(go + (j - 1) * ge)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            E[i][j] = max(E[i][j - 1] - ge, H[i][j - 1] - go)
            F[i][j] = max(F[i - 1][j] - ge, H[i - 1][j] - go)
            H[i][j] = max(H[i - 1][j - 1] + s[q[i - 1]][t[j - 1]], E[i][j], F[i][j])
    ops, i, j, state = [], n, m, "H"
    while i > 0 or j > 0:
        if i == 0:
            state = "E"
        elif j == 0:
            state = "F"
        elif state == "H":
            d = H[i - 1][j - 1] + s[q[i - 1]][t[j - 1]]
            state = "D" if d == H[i][j] else ("E" if E[i][j] == H[i][j] else "F")
        if state == "D":
            ops.append(0)
            i, j, state = i - 1, j - 1, "H"
        elif state == "E":
            ops.append(1)
            stay = i > 0 and j > 0 and E[i][j - 1] - ge >= H[i][j - 1] - go
            j, state = j - 1, ("E" if stay else "H")
        else:
            ops.append(2)
            stay = i > 0 and j > 0 and F[i - 1][j] - ge >= H[i - 1][j] - go
            i, state = i - 1, ("F" if stay else "H")
    return int(H[n][m]), ops[::-1]


def python_nw(query, target, qlen, tlen, subst, gap_open, gap_extend):
    s = subst.tolist()
    width = query.shape[1] + target.shape[1]
    scores, all_ops = [], []
    for b in range(query.shape[0]):
        sc, ops = gotoh_global(query[b, :qlen[b]].tolist(), target[b, :tlen[b]].tolist(), s, gap_open, gap_extend)
        scores.append(sc)
        all_ops.append(ops + [-1] * (width - len(ops)))
    return torch.tensor(scores, dtype=torch.int32), torch.tensor(all_ops, dtype=torch.int8)


def replay(q, t, ops, s, go, ge):
    """Score of an operation string: pairs score S, each gap run costs go + (k-1) ge."""
    i = j = 0
    total, prev = 0, None
    for op in ops:
        if op == 0:
            total += s[q[i]][t[j]]
            i, j = i + 1, j + 1
        else:
            total -= ge if op == prev else go
            i, j = (i, j + 1) if op == 1 else (i + 1, j)
        prev = op
    return total, i, j


def test_matches_scalar_gotoh_traceback():
    case.check_against({"batch": 16, "len_q": 17, "len_t": 23}, python_nw)


def test_ops_replay_to_the_score_and_cover_both_sequences():
    shape = case.small_shape()
    query, target, qlen, tlen, subst = case.problem.inputs(shape, 3, "cpu")
    score, ops = ref.Model()(query, target, qlen, tlen, subst)
    for b in range(8):
        row = [o for o in ops[b].tolist() if o != -1]
        total, i, j = replay(query[b].tolist(), target[b].tolist(), row, subst.tolist(), 5, 2)
        assert (i, j) == (int(qlen[b]), int(tlen[b])) and total == int(score[b])


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
