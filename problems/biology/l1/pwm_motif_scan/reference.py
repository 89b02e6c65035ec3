"""biology/l1/pwm_motif_scan: position weight matrix scan of DNA on both strands."""
import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ_CHUNK = 64  # sequences per conv1d chunk: bounds the [chunk, 2M, L] score tensor


class Model(nn.Module):
    def __init__(self, pwm, widths, thresholds):
        super().__init__()
        self.pwm, self.widths, self.thresholds = pwm, widths, thresholds

    def forward(self, seqs):
        n_motifs, max_w, _ = self.pwm.shape
        n_seqs, seq_len = seqs.shape
        cols = torch.arange(max_w, device=seqs.device)
        used = cols[None, :] < self.widths[:, None]                                   # [M, W]
        fwd = self.pwm * used[..., None]
        # reverse complement: rc[m, t, b] = pwm[m, w-1-t, 3-b] for t < w
        src = (self.widths[:, None] - 1 - cols[None, :]).clamp_min(0)
        rev = self.pwm.gather(1, src[..., None].expand(-1, -1, 4).long()).flip(-1) * used[..., None]
        kernel = torch.cat([fwd, rev]).permute(0, 2, 1)                                # [2M, 4, W]
        n_pos = seq_len  # positions p = 0 .. L-1, invalid ones (p > L - w) masked below
        valid = torch.arange(n_pos, device=seqs.device)[None, :] <= seq_len - self.widths[:, None]  # [M, L]
        best, best_pos, n_hits = [], [], []
        for s0 in range(0, n_seqs, SEQ_CHUNK):
            onehot = F.one_hot(seqs[s0:s0 + SEQ_CHUNK].long(), 4).to(self.pwm.dtype).permute(0, 2, 1)
            onehot = F.pad(onehot, (0, max_w - 1))                                   # zero columns past the end
            scores = F.conv1d(onehot, kernel)                                          # [C, 2M, L]
            scores = scores.view(-1, 2, n_motifs, n_pos).permute(0, 2, 3, 1)          # [C, M, L, strand]
            scores = scores.masked_fill(~valid[None, :, :, None], float("-inf")).flatten(2)  # index 2p + strand
            b, pos = scores.max(-1)                      # first maximum: smallest p, forward first
            best.append(b)
            best_pos.append(pos.int())
            n_hits.append((scores >= self.thresholds[None, :, None]).sum(-1).int())
        return torch.cat(best), torch.cat(best_pos), torch.cat(n_hits)


def get_init_inputs(shape):
    gen = torch.Generator().manual_seed(4242)
    m, max_w = shape["n_motifs"], shape["max_width"]
    # log-odds of peaked base distributions, rounded to multiples of 2^-8 so every sum is exact
    probs = torch.softmax(3 * torch.randn(m, max_w, 4, generator=gen), -1) * 0.97 + 0.0075
    pwm = torch.round(torch.log2(probs / 0.25) * 256) / 256
    widths = torch.randint(max(4, max_w // 2), max_w + 1, (m,), generator=gen).int()
    # threshold: 60% of the best attainable score of each motif, rounded to 2^-8
    best = (pwm.amax(-1) * (torch.arange(max_w)[None, :] < widths[:, None])).sum(1)
    thresholds = torch.round(0.6 * best * 256) / 256
    return {"pwm": pwm, "widths": widths, "thresholds": thresholds}


def get_inputs(shape, generator, device):
    seqs = torch.randint(0, 4, (shape["n_seqs"], shape["seq_len"]), generator=generator, dtype=torch.uint8)
    return (seqs.to(device),)
