"""biology/l1/tanimoto_topk: Tanimoto similarity search of bit fingerprints, top-k per query."""
import torch
import torch.nn as nn

DB_CHUNK = 1 << 15  # database fingerprints per chunk


def popcount64(x: torch.Tensor) -> torch.Tensor:
    """SWAR popcount of int64 words (torch has no popcount); the masks drop arithmetic-shift sign bits."""
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    return (x * 0x0101010101010101) >> 56


class Model(nn.Module):
    def __init__(self, k: int = 10):
        super().__init__()
        self.k = int(k)

    def forward(self, queries, database):
        q, d = queries.view(torch.int64), database.view(torch.int64)   # pairs of 32-bit words
        a = popcount64(q).sum(1)
        best_sim = torch.empty(q.shape[0], 0, dtype=torch.float32, device=q.device)
        best_idx = torch.empty(q.shape[0], 0, dtype=torch.int64, device=q.device)
        for c0 in range(0, d.shape[0], DB_CHUNK):
            chunk = d[c0:c0 + DB_CHUNK]
            c = popcount64(q[:, None, :] & chunk[None, :, :]).sum(-1)       # [M, chunk]
            denom = (a[:, None] + popcount64(chunk).sum(1)[None, :] - c).float()
            sim = torch.where(denom > 0, c.float() / denom, torch.zeros_like(denom))
            idx = torch.arange(c0, c0 + chunk.shape[0], device=q.device).expand_as(sim)
            # candidates in ascending index order; a stable sort keeps that order among equal sims
            cand_sim, cand_idx = torch.cat([best_sim, sim], 1), torch.cat([best_idx, idx], 1)
            order = torch.sort(cand_sim, dim=1, descending=True, stable=True).indices[:, :self.k]
            best_sim, best_idx = cand_sim.gather(1, order), cand_idx.gather(1, order)
        return best_idx, best_sim


def get_init_inputs(shape):
    return {"k": shape["k"]}


def _fingerprints(n, words, density, generator):
    """Random fingerprints with about `density` of the bits set, packed into int32 words."""
    bits = torch.rand(n, words, 32, generator=generator) < density
    unsigned = (bits.long() << torch.arange(32)).sum(-1)       # 0 .. 2^32 - 1
    return (unsigned - (bits[..., 31].long() << 32)).to(torch.int32)  # two's-complement int32


def get_inputs(shape, generator, device):
    n_q, n_db, words = shape["n_queries"], shape["n_db"], shape["words"]
    database = _fingerprints(n_db, words, 0.05, generator)
    # queries are noisy copies of database entries (near neighbours exist), plus duplicates for ties
    src = torch.randint(0, n_db, (n_q,), generator=generator)
    flip = _fingerprints(n_q, words, 0.01, generator)
    queries = database[src] ^ flip
    dup = torch.randint(0, n_db, (n_db // 50,), generator=generator)
    database[torch.randint(0, n_db, (n_db // 50,), generator=generator)] = database[dup]
    return queries.to(device), database.to(device)
