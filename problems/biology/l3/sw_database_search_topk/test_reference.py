"""Cross-checks for biology/l3/sw_database_search_topk: scalar Gotoh over every pair, planted hits."""
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def gotoh_local(q, t, subst, go, ge):
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


def python_search(queries, qlen, db, offsets, subst, k, gap_open, gap_extend):
    s, off = subst.tolist(), offsets.tolist()
    seqs = [db[off[d]:off[d + 1]].tolist() for d in range(len(off) - 1)]
    idx, scores = [], []
    for q, n in zip(queries.tolist(), qlen.tolist()):
        ranked = sorted((-gotoh_local(q[:n], t, s, gap_open, gap_extend), d) for d, t in enumerate(seqs))[:k]
        idx.append([d for _, d in ranked])
        scores.append([-sc for sc, _ in ranked])
    return torch.tensor(idx), torch.tensor(scores, dtype=torch.int32)


def test_matches_scalar_gotoh():
    shape = {"n_queries": 2, "len_q": 20, "n_db": 25, "mean_db_len": 100, "k": 6}
    case.check_against(shape, python_search)


def test_planted_homologs_rank_first():
    shape = {"n_queries": 2, "len_q": 60, "n_db": 600, "mean_db_len": 100, "k": 5}
    idx, score = case.problem.module.Model(k=5)(*case.problem.inputs(shape, 0, "cpu"))
    assert bool((score[:, 0] > 40).all()) and bool((score[:, :-1] >= score[:, 1:]).all())


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())


def test_sweeping_either_sequence_gives_the_same_scores():
    # The reference sweeps the shorter side; with an asymmetric matrix the transposition matters.
    g = torch.Generator().manual_seed(3)
    subst = torch.randint(-4, 6, (20, 20), generator=g, dtype=torch.int32)
    q, t = torch.randint(0, 20, (6, 37), generator=g), torch.randint(0, 20, (6, 81), generator=g)
    qlen, tlen = torch.tensor([37, 30, 19, 1, 37, 25]), torch.tensor([81, 50, 3, 60, 1, 70])
    by_target = ref.sw_scores(q, qlen, t, tlen, subst, 11, 1)
    by_query = ref.sw_scores(t, tlen, q, qlen, subst.T, 11, 1)
    assert torch.equal(by_target, by_query)
    s = subst.tolist()
    assert by_target.tolist() == [gotoh_local(q[b, :qlen[b]].tolist(), t[b, :tlen[b]].tolist(), s, 11, 1)
                                  for b in range(6)]


def test_matches_scalar_gotoh_when_the_query_is_the_longer_side():
    shape = {"n_queries": 1, "len_q": 400, "n_db": 6, "mean_db_len": 100, "k": 3}
    case.check_against(shape, python_search)
