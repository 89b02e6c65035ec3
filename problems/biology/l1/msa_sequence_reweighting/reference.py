"""biology/l1/msa_sequence_reweighting: 80%-identity neighbour counts, sequence weights and N_eff."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_TOKENS = 21    # 20 amino acids + gap (20)
ROW_BLOCK = 512  # rows per one-hot GEMM block


class Model(nn.Module):
    def forward(self, msa):
        n_seq, length = msa.shape
        onehot = F.one_hot(msa.long(), N_TOKENS).reshape(n_seq, length * N_TOKENS).float()
        counts = torch.empty(n_seq, dtype=torch.int64, device=msa.device)
        for r0 in range(0, n_seq, ROW_BLOCK):
            matches = onehot[r0:r0 + ROW_BLOCK] @ onehot.T       # exact integers in fp32 (<= 1024)
            counts[r0:r0 + ROW_BLOCK] = (5 * matches >= 4 * length).sum(1)  # identity >= 0.8, self included
        weights = 1.0 / counts.float()
        return weights, weights.sum()


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n_seq, length = shape["n_seq"], shape["length"]
    # families: each sequence mutates one of a few ancestors at its own rate (0-40%), with some gaps
    n_families = max(1, n_seq // 64)
    ancestors = torch.randint(0, 20, (n_families, length), generator=generator)
    family = torch.randint(0, n_families, (n_seq,), generator=generator)
    rate = torch.rand(n_seq, 1, generator=generator) * 0.4
    mutate = torch.rand(n_seq, length, generator=generator) < rate
    msa = torch.where(mutate, torch.randint(0, 20, (n_seq, length), generator=generator), ancestors[family])
    gaps = torch.rand(n_seq, length, generator=generator) < 0.05
    msa = torch.where(gaps, torch.full_like(msa, 20), msa)
    return (msa.to(torch.int8).to(device),)
