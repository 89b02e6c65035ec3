"""biology/l1/kmer_counting: canonical k-mer histogram of sequencing reads (A=0, C=1, G=2, T=3, N=4)."""
import torch
import torch.nn as nn

READ_CHUNK = 1 << 14  # reads per chunk: bounds the [chunk, windows, k] int64 unfold
REPEAT_POOL = 32      # distinct repeat reads that the repeat fraction is drawn from


class Model(nn.Module):
    def __init__(self, k: int = 11):
        super().__init__()
        self.k = int(k)

    def forward(self, reads):
        k = self.k
        pow4 = 4 ** torch.arange(k - 1, -1, -1, device=reads.device, dtype=torch.int64)
        counts = torch.zeros(4 ** k, dtype=torch.int64, device=reads.device)
        for r0 in range(0, reads.shape[0], READ_CHUNK):
            win = reads[r0:r0 + READ_CHUNK].long().unfold(1, k, 1)  # [C, L-k+1, k]
            valid = (win < 4).all(-1)                                # windows without N
            fwd = (win * pow4).sum(-1)
            rc = ((3 - win.flip(-1)) * pow4).sum(-1)                  # reverse complement
            counts += torch.bincount(torch.minimum(fwd, rc)[valid], minlength=4 ** k)
        return counts.int()


def get_init_inputs(shape):
    return {"k": shape["k"]}


def get_inputs(shape, generator, device):
    n_reads, read_len = shape["n_reads"], shape["read_len"]
    reads = torch.randint(0, 4, (n_reads, read_len), generator=generator, dtype=torch.uint8)
    # a fraction of the reads are copies of a few repeat reads: hot k-mers
    pool = torch.randint(0, 4, (REPEAT_POOL, read_len), generator=generator, dtype=torch.uint8)
    is_repeat = torch.rand(n_reads, generator=generator) < shape["repeat_frac"]
    which = torch.randint(0, REPEAT_POOL, (n_reads,), generator=generator)
    reads[is_repeat] = pool[which[is_repeat]]
    n_count = int(round(shape["n_rate"] * n_reads * read_len))
    positions = torch.randint(0, n_reads * read_len, (n_count,), generator=generator)
    reads.view(-1)[positions] = 4
    return (reads.to(device),)
