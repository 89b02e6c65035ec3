"""Oracle for biology/l1/pwm_motif_scan: direct scan, both strands, no one-hot or score tensor.

A program takes a block of sequences and one motif, slides over position tiles, sums the PWM
entries of the forward strand and of the reverse complement in registers (dyadic values: exact
in any order), and keeps the running maximum, its first position and the hit count.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scan(seqs, pwm, widths, thresholds, best_out, pos_out, hits_out, n_seqs, seq_len, n_motifs, max_w,
          BS: tl.constexpr, BP: tl.constexpr):
    m = tl.program_id(1)
    rows = tl.program_id(0) * BS + tl.arange(0, BS)
    row_ok = rows < n_seqs
    w = tl.load(widths + m)
    thr = tl.load(thresholds + m)
    n_pos = seq_len - w + 1
    best = tl.full([BS], float("-inf"), dtype=tl.float32)
    best_pos = tl.zeros([BS], dtype=tl.int32)
    hits = tl.zeros([BS], dtype=tl.int32)
    motif = pwm + m * max_w * 4
    for p0 in range(0, n_pos, BP):
        p = p0 + tl.arange(0, BP)
        ok = row_ok[:, None] & (p < n_pos)[None, :]
        fwd = tl.zeros([BS, BP], dtype=tl.float32)
        rev = tl.zeros([BS, BP], dtype=tl.float32)
        for t in range(0, w):
            x = tl.load(seqs + rows[:, None].to(tl.int64) * seq_len + p[None, :] + t, mask=ok, other=0).to(tl.int32)
            fwd += tl.load(motif + t * 4 + x, mask=ok, other=0.0)
            rev += tl.load(motif + (w - 1 - t) * 4 + 3 - x, mask=ok, other=0.0)
        fwd = tl.where(ok, fwd, float("-inf"))
        rev = tl.where(ok, rev, float("-inf"))
        hits += tl.sum((fwd >= thr).to(tl.int32) + (rev >= thr).to(tl.int32), axis=1)
        tile_max = tl.maximum(tl.max(fwd, axis=1), tl.max(rev, axis=1))
        big = 2147483647
        idx_f = tl.min(tl.where(fwd == tile_max[:, None], 2 * p[None, :], big), axis=1)
        idx_r = tl.min(tl.where(rev == tile_max[:, None], 2 * p[None, :] + 1, big), axis=1)
        better = tile_max > best  # strictly: an earlier tile keeps ties
        best_pos = tl.where(better, tl.minimum(idx_f, idx_r), best_pos)
        best = tl.where(better, tile_max, best)
    out = rows * n_motifs + m
    tl.store(best_out + out, best, mask=row_ok)
    tl.store(pos_out + out, best_pos, mask=row_ok)
    tl.store(hits_out + out, hits, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self, pwm, widths, thresholds):
        super().__init__()
        self.pwm, self.widths, self.thresholds = pwm.contiguous(), widths, thresholds

    def forward(self, seqs):
        n_seqs, seq_len = seqs.shape
        n_motifs, max_w, _ = self.pwm.shape
        best = torch.empty(n_seqs, n_motifs, device=seqs.device, dtype=self.pwm.dtype)
        pos = torch.empty(n_seqs, n_motifs, device=seqs.device, dtype=torch.int32)
        hits = torch.empty_like(pos)
        bs, bp = (16, 128) if seqs.is_cuda else (64, 256)
        _scan[(triton.cdiv(n_seqs, bs), n_motifs)](seqs.contiguous(), self.pwm, self.widths, self.thresholds,
                                                   best, pos, hits, n_seqs, seq_len, n_motifs, max_w, BS=bs, BP=bp)
        return best, pos, hits
