"""biology/l1/lddt_score: lDDT-Calpha of predicted vs reference structures (AlphaFold2's lddt)."""
import torch
import torch.nn as nn

from orchestrator.runner.compare import mismatches_allowed

CUTOFF = 15.0
THRESHOLDS = (0.5, 1.0, 2.0, 4.0)


def pair_distances(x):
    """Exact pairwise distances sqrt(sum (x_i - x_j)^2) (no |x|^2 + |y|^2 - 2 x.y expansion)."""
    return torch.sqrt(((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1))


def pair_counts(true, mask):
    """The number of pairs each residue's score averages over, [B, L] float64 (a chain's is the
    row sum). One chain at a time: [L, L] temporaries instead of the reference's [B, L, L, 3]."""
    counts = torch.empty(mask.shape, dtype=torch.float64, device=mask.device)
    for b in range(mask.shape[0]):
        counts[b] = included(pair_distances(true[b:b + 1]), mask[b:b + 1])[0].sum(-1)
    return counts


def check_output(inputs, output, expected, tolerance):
    """Scores are ratios of exact sums of quarters, so a correct kernel matches the reference
    except where a distance within an ulp of a threshold or the 15 A cutoff rounds the other way
    (an FMA, another order of the squared terms). Such a flip moves a residue's score by 0.25 or
    at most 1 over its number of pairs (less one, if the flip drops a pair at the cutoff), and
    its chain's global score by as much over the chain's pairs. So per_res must agree (within
    `atol`, the final division's rounding) except at a `fraction` share of residues or
    `min_mismatches` (one flip moves two), each of those within one flip; a chain's global
    within (its differing residues + 2) flips. The bound follows the shape: 1e-2 to 2e-2 for a
    chain of 16 residues, 1e-4 at the default shape, where any other formula is off by far more."""
    _, true, mask = inputs
    (per_res, glob), (per_ref, glob_ref) = output, expected
    per_res, per_ref, glob, glob_ref = (t.double() for t in (per_res, per_ref, glob, glob_ref))
    pairs = pair_counts(true, mask)
    slack = float(tolerance.get("atol", 1e-6))
    off = (per_res - per_ref).abs()
    differ = off > slack
    n_differ, total = int(differ.sum()), per_res.numel()
    allowed = mismatches_allowed(tolerance, total)
    if n_differ > allowed:
        return False, (f"per_res: {n_differ} of {total} residues differ from the reference (at most {allowed} may: "
                       f"a rounding flip of one pair moves two)")
    beyond = off > 1.0 / (pairs - 1).clamp_min(1) + slack  # a cutoff flip may leave pairs - 1
    if beyond.any():
        b, i = beyond.nonzero()[0].tolist()
        return False, (f"per_res[{b}, {i}] is off by {float(off[b, i]):.3g}, more than one flip of its "
                       f"{int(pairs[b, i])} pairs allows")
    chain_pairs = pairs.sum(-1).clamp_min(1)
    glob_off = (glob - glob_ref).abs()
    bound = (differ.sum(-1) + 2) / (chain_pairs - 1).clamp_min(1) + slack
    too_far = glob_off > bound
    if too_far.any():
        b = int(too_far.nonzero()[0])
        return False, (f"global[{b}] is off by {float(glob_off[b]):.3g}; its chain's {int(chain_pairs[b])} pairs and "
                       f"{int(differ[b].sum())} differing residues allow {float(bound[b]):.3g}")
    return True, f"{total - n_differ} of {total} residues agree; the rest and every global score within rounding flips"


def included(d_t, mask):
    """include_ij: 1 where the true distance is under the cutoff, both residues valid, i != j."""
    not_self = 1 - torch.eye(mask.shape[1], dtype=mask.dtype, device=mask.device)
    return (d_t < CUTOFF).to(mask.dtype) * mask[:, :, None] * mask[:, None, :] * not_self


def preserved(d_t, d_p):
    """frac_ij: the quarter points of the four thresholds the pair's distance error stays under."""
    err = (d_t - d_p).abs()
    return 0.25 * sum((err < t).to(d_t.dtype) for t in THRESHOLDS)


def scores(include, frac):
    """(per_res [B, L], global [B]) from the pairs' include and frac."""
    per_res = (1e-10 + (include * frac).sum(-1)) / (1e-10 + include.sum(-1))
    global_score = (1e-10 + (include * frac).sum((-1, -2))) / (1e-10 + include.sum((-1, -2)))
    return per_res, global_score


class Model(nn.Module):
    def forward(self, pred, true, mask):
        d_t, d_p = pair_distances(true), pair_distances(pred)
        return scores(included(d_t, mask), preserved(d_t, d_p))


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    batch, n_res, noise = shape["batch"], shape["n_res"], shape["noise"]
    # compact C-alpha chains: random walk of 3.8 A steps with a persistent direction
    steps = torch.randn(batch, n_res, 3, generator=generator, dtype=torch.float64)
    steps = steps + 0.5 * torch.roll(steps, 1, 1)
    true = torch.cumsum(3.8 * steps / steps.norm(dim=-1, keepdim=True), 1)
    pred = true + noise * torch.randn(batch, n_res, 3, generator=generator, dtype=torch.float64)
    n_valid = n_res - (torch.rand(batch, generator=generator) * 0.1 * n_res).long()
    mask = (torch.arange(n_res)[None, :] < n_valid[:, None]).float()
    return pred.float().to(device), true.float().to(device), mask.to(device)
