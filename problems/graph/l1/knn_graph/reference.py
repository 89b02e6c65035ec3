"""graph/l1/knn_graph: the k nearest other points of every point (squared Euclidean), per point cloud."""
import torch
import torch.nn as nn

CHUNK_ROWS = 2048
CHUNK_ELEMENTS = 2 ** 28  # caps the [rows, N, D] difference temporary at 1 GiB in fp32


class Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = int(k)

    def forward(self, pos):
        batch, n, dim = pos.shape
        idx = torch.empty(batch, n, self.k, dtype=torch.long, device=pos.device)
        d2 = torch.empty(batch, n, self.k, dtype=pos.dtype, device=pos.device)
        rows_per_chunk = max(1, min(CHUNK_ROWS, CHUNK_ELEMENTS // (n * dim)))
        for b in range(batch):
            points = pos[b]
            for start in range(0, n, rows_per_chunk):
                rows = points[start:start + rows_per_chunk]
                # exact differences (not |p|^2 + |q|^2 - 2 p.q, which cancels for close pairs)
                dist = ((rows[:, None, :] - points[None, :, :]) ** 2).sum(-1)
                local = torch.arange(rows.shape[0], device=pos.device)
                dist[local, local + start] = float("inf")
                # a stable sort of an index-ordered row breaks distance ties by the smaller index
                vals, order = torch.sort(dist, dim=1, stable=True)
                idx[b, start:start + rows.shape[0]] = order[:, :self.k]
                d2[b, start:start + rows.shape[0]] = vals[:, :self.k]
        return idx, d2


def check_output(inputs, output, expected, tolerance):
    """d2 matches the reference's sorted distances within atol/rtol; every idx is another point of the
    same cloud, distinct within its row, whose recomputed (float64) distance equals the returned d2
    within atol/rtol. Swaps between equal distances therefore pass."""
    (pos,) = inputs
    idx, d2 = output
    _, ref_d2 = expected
    atol, rtol = float(tolerance["atol"]), float(tolerance["rtol"])
    batch, n, k = idx.shape
    idx, d2, ref_d2, pos = idx.to(pos.device), d2.to(pos.device).double(), ref_d2.to(pos.device).double(), pos.double()
    if bool(((idx < 0) | (idx >= n)).any()):
        return False, f"idx outside [0, {n})"
    self_index = torch.arange(n, device=idx.device)[None, :, None]
    if bool((idx == self_index).any()):
        return False, f"{int((idx == self_index).sum())} rows list the point itself as a neighbour"
    ordered = idx.sort(dim=-1).values
    if bool((ordered[..., 1:] == ordered[..., :-1]).any()):
        return False, "a neighbour appears twice in one row"
    bad = (d2 - ref_d2).abs() > atol + rtol * ref_d2.abs()
    if bool(bad.any()):
        first = bad.nonzero()[0].tolist()
        return False, (f"{int(bad.sum())} of {bad.numel()} d2 values differ from the reference's k smallest "
                       f"distances beyond atol={atol:g} rtol={rtol:g}; first at {tuple(first)}")
    rel = float((d2 - ref_d2).norm() / ref_d2.norm().clamp_min(1e-300))
    if rel > float(tolerance.get("rel_norm_max", 1e-2)):
        return False, f"d2 relative norm error {rel:.3g} too large"
    recomputed = torch.zeros_like(d2)
    for c in range(pos.shape[-1]):  # one coordinate at a time: no [B, N, k, D] temporary
        coord = pos[..., c]
        recomputed += (coord[:, :, None] - torch.gather(coord, 1, idx.reshape(batch, n * k)).reshape(batch, n, k)) ** 2
    wrong = (recomputed - d2).abs() > atol + rtol * recomputed
    if bool(wrong.any()):
        first = wrong.nonzero()[0].tolist()
        return False, (f"{int(wrong.sum())} returned indices whose recomputed distance differs from their d2; "
                       f"first at {tuple(first)}")
    return True, f"d2 within atol={atol:g} rtol={rtol:g} (max abs err {float((d2 - ref_d2).abs().max()):.3g}); indices verified"


def get_init_inputs(shape):
    return {"k": shape["k"]}


def get_inputs(shape, generator, device):
    batch, n, dim = shape["batch"], shape["n_points"], shape["dim"]
    # a dense core and sparse tails (Gaussian clouds): cell-based methods see uneven occupancy
    pos = torch.randn(batch, n, dim, generator=generator)
    return (pos.to(device),)
