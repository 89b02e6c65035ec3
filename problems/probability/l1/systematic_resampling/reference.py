"""probability/l1/systematic_resampling: systematic resampling (Kitagawa 1996) for B particle systems.

W = softmax(log_w) in float64; cdf = cumsum(W) (left to right) divided by its last entry;
ancestor of slot k = searchsorted(cdf, (u + k) / N, right=True) clamped to N - 1, i.e. the
first i with cdf_i > (u + k) / N; the resampled particles are particles[b, ancestor].

The answer is not unique where a position (u + k) / N lands within rounding of a CDF value:
two correct float64 prefix sums (different summation orders) may then pick neighbouring
ancestors. `check_output` accepts such boundary ties on at most 1 - `fraction` of the slots.
"""
import math

import torch
import torch.nn as nn

TIE_WIDTH = 1e-11  # float64 CDFs of two summation orders differ by < N * 2^-52 ~ 2e-10 at worst (N = 2^20)


class Model(nn.Module):
    def forward(self, log_w: torch.Tensor, u: torch.Tensor, particles: torch.Tensor):
        cdf = normalized_cdf(log_w)
        n = log_w.shape[1]
        slots = torch.arange(n, dtype=torch.float64, device=log_w.device)
        positions = (u.double()[:, None] + slots) / n
        ancestors = torch.searchsorted(cdf, positions, right=True).clamp_(max=n - 1)
        resampled = torch.gather(particles, 1, ancestors[:, :, None].expand(-1, -1, particles.shape[2]))
        return ancestors, resampled


def normalized_cdf(log_w: torch.Tensor) -> torch.Tensor:
    weights = torch.softmax(log_w.double(), 1)
    cdf = torch.cumsum(weights, 1)
    return cdf / cdf[:, -1:]


def boundary_ties(log_w, u, rows, slots, got, want) -> torch.Tensor:
    """For mismatched slots: is `got` a boundary tie of `want`? Every CDF value crossed between
    the two choices (cdf[min] .. cdf[max - 1], one value when they are off by one position)
    must lie within TIE_WIDTH of the slot's position (u + k) / N."""
    n = log_w.shape[1]
    systems, which = torch.unique(rows, return_inverse=True)  # one CDF per affected system
    cdf = normalized_cdf(log_w[systems])
    positions = (u[rows].double() + slots.double()) / n
    lo, hi = torch.minimum(got, want), torch.maximum(got, want)
    first_crossed = cdf[which, lo]
    last_crossed = cdf[which, hi - 1]
    return ((first_crossed - positions).abs() <= TIE_WIDTH) & ((last_crossed - positions).abs() <= TIE_WIDTH)


def check_output(inputs, output, expected, tolerance):
    """Ancestors: equal to the reference but for at most ceil((1 - fraction) * B * N) boundary ties;
    particles: exactly particles[b, ancestor] for the candidate's own ancestors."""
    # The harness returns the candidate's output on the CPU while the inputs and the reference
    # output may sit on the GPU: judge everything on the reference's device.
    device = expected[0].device
    log_w, u, particles = (t.to(device) for t in inputs)
    ancestors, resampled = (t.to(device) for t in output)
    ref_ancestors = expected[0]
    n = log_w.shape[1]
    if bool(((ancestors < 0) | (ancestors >= n)).any()):
        return False, f"ancestor indices outside [0, {n})"
    differ = ancestors != ref_ancestors
    n_differ = int(differ.sum())
    allowed = math.ceil((1.0 - float(tolerance["fraction"])) * ancestors.numel() - 1e-9)
    if n_differ > allowed:
        return False, (f"{n_differ} of {ancestors.numel()} ancestors differ from the reference "
                       f"(at most {allowed} boundary ties allowed)")
    if n_differ:
        rows, slots = differ.nonzero(as_tuple=True)
        ties = boundary_ties(log_w, u, rows, slots, ancestors[rows, slots], ref_ancestors[rows, slots])
        if not bool(ties.all()):
            b, k = int(rows[~ties][0]), int(slots[~ties][0])
            return False, (f"ancestor[{b}, {k}] = {int(ancestors[b, k])} but the reference gives "
                           f"{int(ref_ancestors[b, k])}, and (u + k)/N is not at a CDF boundary between them")
    gathered = torch.gather(particles, 1, ancestors[:, :, None].expand(-1, -1, particles.shape[2]))
    if not torch.equal(resampled, gathered):
        bad = (resampled != gathered).any(2).nonzero()[:3].tolist()
        return False, f"resampled particles are not particles[b, ancestors[b, k]] (first at {bad})"
    return True, f"{ancestors.numel() - n_differ} of {ancestors.numel()} ancestors exact, {n_differ} boundary ties"


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    batch, n, dim = shape["batch"], shape["n_particles"], shape["dim"]
    log_w = torch.randn(batch, n, generator=generator) * float(shape["weight_skew"]) - 3.0
    u = torch.rand(batch, generator=generator)
    particles = torch.randn(batch, n, dim, generator=generator)
    return log_w.to(device), u.to(device), particles.to(device)
