"""biology/l3/distributed_kmer_counting: canonical k-mer counting with hash-partitioned
all-to-all (HipMer / kmerind style). Bases A=0, C=1, G=2, T=3, N=4; k <= 31 (int64 codes)."""
import hashlib

import torch
import torch.distributed as dist
import torch.nn as nn

from orchestrator.runner.cbrng import owner_of

READ_CHUNK = 1 << 13  # reads per chunk: bounds the [chunk, windows, k] int64 unfold
COVERAGE = 10         # reads sample a shared genome about 10x deep
N_RATE = 0.001


def canonical_codes(reads, k):
    """Canonical codes min(fwd, revcomp) of every window without an N, in read order."""
    pow4 = 4 ** torch.arange(k - 1, -1, -1, device=reads.device, dtype=torch.int64)
    out = []
    for r0 in range(0, reads.shape[0], READ_CHUNK):
        win = reads[r0:r0 + READ_CHUNK].long().unfold(1, k, 1)  # [C, L-k+1, k]
        valid = (win < 4).all(-1)
        fwd = (win * pow4).sum(-1)
        rc = ((3 - win.flip(-1)) * pow4).sum(-1)
        out.append(torch.minimum(fwd, rc)[valid])
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64, device=reads.device)


class Model(nn.Module):
    def __init__(self, k, min_count=2):
        super().__init__()
        self.k, self.min_count = int(k), int(min_count)

    def forward(self, reads):
        world = dist.get_world_size()
        codes = canonical_codes(reads, self.k)
        owner = owner_of(codes, world)
        order = torch.argsort(owner, stable=True)
        send_counts = torch.bincount(owner, minlength=world)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)  # sizes first
        recv = torch.empty(int(recv_counts.sum()), dtype=torch.int64, device=reads.device)
        dist.all_to_all_single(recv, codes[order].contiguous(), recv_counts.tolist(), send_counts.tolist())
        uniq, counts = torch.unique(recv, return_counts=True)
        keep = counts >= self.min_count
        return uniq[keep], counts[keep].int()


def get_init_inputs(shape):
    return {"k": shape["k"], "min_count": 2}


def _genome(shape, generator, world_size):
    length = max(4 * shape["read_len"], shape["reads_per_rank"] * world_size * shape["read_len"] // COVERAGE)
    genome = torch.randint(0, 4, (length,), generator=generator, dtype=torch.uint8)
    base = int(torch.randint(0, 2**62, (1,), generator=generator))
    return genome, base


_CACHE = {}


def _cached_genome(shape, generator, world_size):
    # The judge asks for every rank's reads with identically seeded generators: build once.
    key = (hashlib.sha1(generator.get_state().numpy().tobytes()).hexdigest(), tuple(sorted(shape.items())), world_size)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = _genome(shape, generator, world_size)
    return _CACHE[key]


GEN_CHUNK = 1 << 16  # reads drawn per step: bounds the judge's host temporaries to a few MB


def _sparse_sites(numel, rate, g):
    """Flat positions hit at `rate` per base: a binomial count, then uniform positions (a
    repeat hits once). Per-base uniforms cost 4 bytes and a draw for every base."""
    if rate <= 0:
        return torch.zeros(0, dtype=torch.int64)
    count = int(torch.binomial(torch.tensor([float(numel)]), torch.tensor([float(rate)]), generator=g))
    return torch.randint(0, numel, (count,), generator=g)


def get_inputs(shape, generator, device, rank=0, world_size=1):
    """Rank r's reads: windows of a shared random genome (half reverse-complemented), with
    substitution errors at `error_rate` (singleton k-mers) and Ns at 0.1 %. Drawn in chunks
    of reads, errors and Ns at sparse sites: whole-shard int64 index and per-base float
    temporaries took ~30 bytes per base, past the sandbox's host memory at large shapes."""
    genome, base = _cached_genome(shape, generator, world_size)
    n, length = shape["reads_per_rank"], shape["read_len"]
    g = torch.Generator().manual_seed(base + 1000003 * rank)
    windows = genome.unfold(0, length, 1)  # a view: row s is genome[s:s + length]
    reads = torch.empty(n, length, dtype=torch.uint8)
    for r0 in range(0, n, GEN_CHUNK):
        c = min(GEN_CHUNK, n - r0)
        chunk = windows[torch.randint(0, windows.shape[0], (c,), generator=g)]
        flip = torch.rand(c, 1, generator=g) < 0.5
        chunk = torch.where(flip, 3 - chunk.flip(-1), chunk).view(-1)
        err = _sparse_sites(chunk.numel(), shape["error_rate"], g)
        chunk[err] = (chunk[err] + torch.randint(1, 4, (err.numel(),), generator=g, dtype=torch.uint8)) % 4
        chunk[_sparse_sites(chunk.numel(), N_RATE, g)] = 4
        reads[r0:r0 + c] = chunk.view(c, length)
    return (reads.to(device),)
