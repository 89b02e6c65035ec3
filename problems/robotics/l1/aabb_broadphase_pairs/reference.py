"""robotics/l1/aabb_broadphase_pairs: every overlapping pair of N axis-aligned boxes (sort and sweep)."""
import torch
import torch.nn as nn

CANDIDATES_PER_CHUNK = 2 ** 24


class Model(nn.Module):
    def forward(self, lo, hi):                                  # [N,3] each -> pairs int64 [P,2]
        n = lo.shape[0]
        order = torch.argsort(lo[:, 0], stable=True)
        lo_s, hi_s = lo[order], hi[order]
        # sorted box i sweeps over j > i while lo_x_j <= hi_x_i (those overlap it on x)
        end = torch.searchsorted(lo_s[:, 0].contiguous(), hi_s[:, 0].contiguous(), right=True)
        start = torch.arange(1, n + 1, device=lo.device)
        counts = (end - start).clamp(min=0)
        cum = torch.cumsum(counts, 0)
        found = []
        first = 0
        while first < n:                                        # chunks of about CANDIDATES_PER_CHUNK candidates
            done_before = int(cum[first - 1]) if first else 0
            last = int(torch.searchsorted(cum, done_before + CANDIDATES_PER_CHUNK, right=True))
            last = max(last, first + 1)
            i = torch.repeat_interleave(torch.arange(first, last, device=lo.device), counts[first:last])
            offset = torch.arange(i.numel(), device=lo.device) - torch.repeat_interleave(
                cum[first:last] - counts[first:last] - done_before, counts[first:last])
            j = start[i] + offset
            keep = ((lo_s[i, 1:] <= hi_s[j, 1:]) & (lo_s[j, 1:] <= hi_s[i, 1:])).all(-1)
            a, b = order[i[keep]], order[j[keep]]
            found.append(torch.stack([torch.minimum(a, b), torch.maximum(a, b)], -1))
            first = last
        pairs = torch.cat(found) if found else torch.empty(0, 2, dtype=torch.long, device=lo.device)
        key = pairs[:, 0] * n + pairs[:, 1]
        return pairs[torch.argsort(key)]


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n, extent, sigma = shape["n_boxes"], shape["mean_extent"], shape["size_sigma"]
    g = generator
    centre = torch.rand(n, 3, generator=g)
    # log-normal sizes with mean `extent` (a few huge boxes when sigma is large), random aspect
    size = extent * torch.exp(sigma * torch.randn(n, 1, generator=g) - sigma ** 2 / 2)
    size = size * (0.5 + torch.rand(n, 3, generator=g))
    lo, hi = centre - size / 2, centre + size / 2
    return lo.to(device), hi.to(device)
