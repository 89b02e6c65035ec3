"""biology/l3/sw_database_search_topk: Smith-Waterman search of queries against a protein database, top-k hits.

Each (query, database sequence) pair is scored exactly as biology/l1/smith_waterman_score
(local alignment, affine gaps go = 11, ge = 1, BLOSUM62).
"""
import math

import torch
import torch.nn as nn

# BLOSUM62 (Henikoff & Henikoff 1992), residue order ARNDCQEGHILKMFPSTWYV
BLOSUM62_ORDER = "ARNDCQEGHILKMFPSTWYV"
BLOSUM62 = [
    [4, -1, -2, -2, 0, -1, -1, 0, -2, -1, -1, -1, -1, -2, -1, 1, 0, -3, -2, 0],
    [-1, 5, 0, -2, -3, 1, 0, -2, 0, -3, -2, 2, -1, -3, -2, -1, -1, -3, -2, -3],
    [-2, 0, 6, 1, -3, 0, 0, 0, 1, -3, -3, 0, -2, -3, -2, 1, 0, -4, -2, -3],
    [-2, -2, 1, 6, -3, 0, 2, -1, -1, -3, -4, -1, -3, -3, -1, 0, -1, -4, -3, -3],
    [0, -3, -3, -3, 9, -3, -4, -3, -3, -1, -1, -3, -1, -2, -3, -1, -1, -2, -2, -1],
    [-1, 1, 0, 0, -3, 5, 2, -2, 0, -3, -2, 1, 0, -3, -1, 0, -1, -2, -1, -2],
    [-1, 0, 0, 2, -4, 2, 5, -2, 0, -3, -3, 1, -2, -3, -1, 0, -1, -3, -2, -2],
    [0, -2, 0, -1, -3, -2, -2, 6, -2, -4, -4, -2, -3, -3, -2, 0, -2, -2, -3, -3],
    [-2, 0, 1, -1, -3, 0, 0, -2, 8, -3, -3, -1, -2, -1, -2, -1, -2, -2, 2, -3],
    [-1, -3, -3, -3, -1, -3, -3, -4, -3, 4, 2, -3, 1, 0, -3, -2, -1, -3, -1, 3],
    [-1, -2, -3, -4, -1, -2, -3, -4, -3, 2, 4, -2, 2, 0, -3, -2, -1, -2, -1, 1],
    [-1, 2, 0, -1, -3, 1, 1, -2, -1, -3, -2, 5, -1, -3, -1, 0, -1, -3, -2, -2],
    [-1, -1, -2, -3, -1, 0, -2, -3, -2, 1, 2, -1, 5, 0, -2, -1, -1, -1, -1, 1],
    [-2, -3, -3, -3, -2, -3, -3, -3, -1, 0, 0, -3, 0, 6, -4, -2, -2, 1, 3, -1],
    [-1, -2, -2, -1, -3, -1, -1, -2, -2, -3, -3, -1, -2, -4, 7, -1, -1, -4, -3, -2],
    [1, -1, 1, 0, -1, 0, 0, 0, -1, -2, -2, 0, -1, -2, -1, 4, 1, -3, -2, -2],
    [0, -1, 0, -1, -1, -1, -1, -2, -2, -1, -1, -1, -1, -2, -1, 1, 5, -2, -2, 0],
    [-3, -3, -4, -4, -2, -2, -3, -2, -2, -3, -2, -3, -1, 1, -4, -3, -2, 11, 2, -3],
    [-2, -2, -2, -3, -2, -1, -2, -3, 2, -1, -1, -2, -1, 3, -3, -2, -2, 2, 7, -1],
    [0, -3, -3, -3, -1, -2, -2, -3, -3, 3, 1, -2, 1, -1, -2, -2, 0, -3, -1, 4],
]
NEG = -(1 << 28)
BUCKET = 512  # database sequences per length bucket (sorted by length, padded to the bucket maximum)


def sw_scores(query, qlen, target, tlen, subst, go, ge):
    """Best local score of every pair (query[b], target[b]): the column sweep of the l1 problem."""
    batch, lq = query.shape
    rows = torch.arange(lq + 1, device=query.device)
    h = torch.zeros(batch, lq + 1, dtype=torch.int32, device=query.device)
    e = torch.full_like(h, NEG)
    best = torch.zeros(batch, dtype=torch.int32, device=query.device)
    row_ok = rows[None, 1:] <= qlen[:, None]
    for j in range(target.shape[1]):
        s = subst[query, target[:, j:j + 1]]
        e = torch.maximum(e - ge, h - go)
        h_no_f = torch.zeros_like(h)
        h_no_f[:, 1:] = torch.maximum(torch.clamp(h[:, :-1] + s, min=0), e[:, 1:])
        shifted = torch.cummax(h_no_f + rows * ge, dim=1).values
        f = torch.full_like(h, NEG)
        f[:, 1:] = shifted[:, :-1] - go - (rows[1:] - 1) * ge
        h = torch.maximum(h_no_f, f)
        valid = (j < tlen)[:, None] & row_ok
        best = torch.maximum(best, torch.where(valid, h[:, 1:], 0).amax(1))
    return best


class Model(nn.Module):
    def __init__(self, k: int = 10, gap_open: int = 11, gap_extend: int = 1):
        super().__init__()
        self.k, self.go, self.ge = int(k), int(gap_open), int(gap_extend)

    def forward(self, queries, qlen, db, offsets, subst):
        n_q = queries.shape[0]
        lengths = offsets[1:] - offsets[:-1]
        n_db = lengths.shape[0]
        order = torch.argsort(lengths, stable=True)
        scores = torch.zeros(n_q, n_db, dtype=torch.int32, device=queries.device)
        for b0 in range(0, n_db, BUCKET):
            members = order[b0:b0 + BUCKET]
            tlen = lengths[members]
            width = int(tlen.max())
            cols = torch.arange(width, device=db.device)
            gather = (offsets[members][:, None] + cols[None, :]).clamp_max(db.shape[0] - 1)
            targets = torch.where(cols[None, :] < tlen[:, None], db[gather], 0)          # [bucket, width]
            pair_q = queries.repeat_interleave(members.shape[0], 0)
            pair_t = targets.repeat(n_q, 1)
            pair_qlen, pair_tlen = qlen.repeat_interleave(members.shape[0]), tlen.repeat(n_q)
            if width > queries.shape[1]:
                # The sweep costs a dozen launches per column: sweep the shorter sequence. The local
                # alignment score is the same with the roles exchanged and the matrix transposed.
                best = sw_scores(pair_t, pair_tlen, pair_q, pair_qlen, subst.T, self.go, self.ge)
            else:
                best = sw_scores(pair_q, pair_qlen, pair_t, pair_tlen, subst, self.go, self.ge)
            scores[:, members] = best.view(n_q, -1)
        # score descending, then database index ascending (a stable sort of the index-ordered row)
        top = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :self.k]
        return top, scores.gather(1, top)


def get_init_inputs(shape):
    return {"k": shape["k"], "gap_open": 11, "gap_extend": 1}


def get_inputs(shape, generator, device):
    n_q, lq, n_db, mean_len = shape["n_queries"], shape["len_q"], shape["n_db"], shape["mean_db_len"]
    queries = torch.randint(0, 20, (n_q, lq), generator=generator)
    qlen = torch.randint(lq // 2, lq + 1, (n_q,), generator=generator)
    # log-normal database lengths with the requested mean, clipped to 50..1000
    sigma = 0.6
    raw = torch.exp(torch.randn(n_db, generator=generator) * sigma + math.log(mean_len) - sigma ** 2 / 2)
    lengths = raw.round().clamp(50, 1000).long()
    db = torch.randint(0, 20, (int(lengths.sum()),), generator=generator)
    offsets = torch.zeros(n_db + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(lengths, 0)
    # plant 5 mutated copies of each query (30% substitutions) at random database entries: true hits
    for q in range(n_q):
        for d in torch.randint(0, n_db, (5,), generator=generator).tolist():
            n = int(min(lengths[d], qlen[q]))
            seg = queries[q, :n].clone()
            mutate = torch.rand(n, generator=generator) < 0.3
            seg[mutate] = torch.randint(0, 20, (int(mutate.sum()),), generator=generator)
            db[offsets[d]:offsets[d] + n] = seg
    subst = torch.tensor(BLOSUM62, dtype=torch.int32)
    return tuple(t.to(device) for t in (queries, qlen, db, offsets, subst))
