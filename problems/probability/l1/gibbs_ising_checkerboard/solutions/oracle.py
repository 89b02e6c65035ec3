"""Oracle for probability/l1/gibbs_ising_checkerboard: one fused Triton kernel per half-sweep.

Each program updates one tile of one colour in place (a colour's sites only read the other
colour, so the in-place update is race-free), generates its uniforms inline with uint32
arithmetic, and after the white half-sweep adds its tile's spin sum to the magnetisation
counter with an integer atomic (exact in any order).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _lowbias32(x):
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


# Triton specialises integer arguments equal to 0 or 1 into Python constants (which have
# no .to()): the sweep counters must stay tensors.
@triton.jit(do_not_specialize=["side", "n_sweeps", "sweep", "colour"])
def _half_sweep(spins, p_up, seed_ptr, counts, side, n_sweeps, sweep, colour,
                BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    chain = tl.program_id(0)
    row0 = tl.program_id(1) * BLOCK_R
    col0 = tl.program_id(2) * BLOCK_C
    seed = tl.load(seed_ptr)
    h = _lowbias32((seed & 0xFFFFFFFF).to(tl.uint32))
    h = _lowbias32((h + 0x9E3779B9) ^ chain.to(tl.uint32))
    h = _lowbias32((h + 0x9E3779B9) ^ (2 * sweep + colour).to(tl.uint32))

    i = row0 + tl.arange(0, BLOCK_R)[:, None]
    j = col0 + tl.arange(0, BLOCK_C)[None, :]
    inside = (i < side) & (j < side)
    base = spins + chain.to(tl.int64) * side * side
    up = tl.where(i == 0, side - 1, i - 1)
    down = tl.where(i == side - 1, 0, i + 1)
    left = tl.where(j == 0, side - 1, j - 1)
    right = tl.where(j == side - 1, 0, j + 1)
    field = (tl.load(base + up * side + j, mask=inside, other=0).to(tl.int32)
             + tl.load(base + down * side + j, mask=inside, other=0).to(tl.int32)
             + tl.load(base + i * side + left, mask=inside, other=0).to(tl.int32)
             + tl.load(base + i * side + right, mask=inside, other=0).to(tl.int32))
    threshold = tl.load(p_up + (field + 4) // 2, mask=inside, other=0.0)
    bits = _lowbias32((h + 0x9E3779B9) ^ (i * side + j).to(tl.uint32))
    u = ((bits >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07  # 2**-23
    new = tl.where(u < threshold, 1, -1).to(tl.int8)
    mine = inside & ((i + j) % 2 == colour)
    tl.store(base + i * side + j, new, mask=mine)
    if colour == 1:
        old = tl.load(base + i * side + j, mask=inside & ((i + j) % 2 == 0), other=0)
        total = tl.sum(tl.sum(tl.where(mine, new, old).to(tl.int32), axis=1), axis=0)
        tl.atomic_add(counts + chain * n_sweeps + sweep, total)


class ModelNew(nn.Module):
    def forward(self, spins: torch.Tensor, p_up: torch.Tensor, seed: torch.Tensor, n_sweeps: int):
        chains, side, _ = spins.shape
        s = spins.contiguous().clone()
        counts = torch.zeros(chains, n_sweeps, dtype=torch.int32, device=s.device)
        block_c = min(triton.next_power_of_2(side), 128)
        block_r = max(1, 4096 // block_c)
        grid = (chains, triton.cdiv(side, block_r), triton.cdiv(side, block_c))
        seed = seed.reshape(1).to(torch.int64)
        for sweep in range(n_sweeps):
            for colour in (0, 1):
                _half_sweep[grid](s, p_up, seed, counts, side, n_sweeps, sweep, colour,
                                  BLOCK_R=block_r, BLOCK_C=block_c)
        return s, (counts.double() / (side * side)).to(p_up.dtype)
