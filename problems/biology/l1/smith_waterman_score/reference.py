"""biology/l1/smith_waterman_score: batched local alignment scores with affine gaps (Gotoh)."""
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
NEG = -(1 << 28)  # "minus infinity" that cannot overflow int32 over 2^10 gap extensions


def substitution_matrix(alphabet: int) -> torch.Tensor:
    """BLOSUM62 for proteins (A = 20); +2 match / -3 mismatch for DNA (A = 4)."""
    if alphabet == 20:
        return torch.tensor(BLOSUM62, dtype=torch.int32)
    return torch.where(torch.eye(alphabet, dtype=torch.bool), 2, -3).int()


class Model(nn.Module):
    def __init__(self, gap_open: int = 11, gap_extend: int = 1):
        super().__init__()
        assert gap_open >= gap_extend >= 0, "the column scan for F needs gap_open >= gap_extend"
        self.go, self.ge = gap_open, gap_extend

    def forward(self, query, target, qlen, tlen, subst):
        batch, lq = query.shape
        rows = torch.arange(lq + 1, device=query.device)
        h = torch.zeros(batch, lq + 1, dtype=torch.int32, device=query.device)  # H of the previous column
        e = torch.full_like(h, NEG)
        best = torch.zeros(batch, dtype=torch.int32, device=query.device)
        row_ok = rows[None, 1:] <= qlen[:, None]
        for j in range(target.shape[1]):  # target columns in order (the DP is sequential in j)
            s = subst[query, target[:, j:j + 1]]  # [B, Lq]
            e = torch.maximum(e - self.ge, h - self.go)
            h_no_f = torch.zeros_like(h)
            h_no_f[:, 1:] = torch.maximum(torch.clamp(h[:, :-1] + s, min=0), e[:, 1:])
            # F_i = max_{k<i} Hp_k - go - (i-1-k) ge: exact "lazy F" as a prefix max (needs go >= ge)
            shifted = torch.cummax(h_no_f + rows * self.ge, dim=1).values
            f = torch.full_like(h, NEG)
            f[:, 1:] = shifted[:, :-1] - self.go - (rows[1:] - 1) * self.ge
            h = torch.maximum(h_no_f, f)
            valid = (j < tlen)[:, None] & row_ok
            best = torch.maximum(best, torch.where(valid, h[:, 1:], 0).amax(1))
        return best


def get_init_inputs(shape):
    return {"gap_open": 11, "gap_extend": 1}


def get_inputs(shape, generator, device):
    batch, lq, lt, alphabet = shape["batch"], shape["len_q"], shape["len_t"], shape["alphabet"]
    query = torch.randint(0, alphabet, (batch, lq), generator=generator)
    # targets are mutated, shifted copies of the queries (per-pair identity 0-90%), so scores spread widely
    shift = torch.randint(0, lq, (batch, 1), generator=generator)
    homolog = query.gather(1, (torch.arange(lt)[None, :] + shift) % lq)
    identity = torch.rand(batch, 1, generator=generator) * 0.9
    keep = torch.rand(batch, lt, generator=generator) < identity
    target = torch.where(keep, homolog, torch.randint(0, alphabet, (batch, lt), generator=generator))
    qlen = torch.randint(lq // 2, lq + 1, (batch,), generator=generator)
    tlen = torch.randint(lt // 2, lt + 1, (batch,), generator=generator)
    subst = substitution_matrix(alphabet)
    return tuple(x.to(device) for x in (query, target, qlen, tlen, subst))
