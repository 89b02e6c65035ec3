"""biology/l1/kabsch_rmsd: all-pairs RMSD after optimal superposition (Kabsch), one molecule's conformers."""
import math

import torch
import torch.nn as nn

ROW_BLOCK = 64      # rows of the RMSD matrix per batched SVD
SCALE_UNIT = 1e-6   # relative size of the rounding in E used by tolerance_scale


class Model(nn.Module):
    def forward(self, coords):
        n_conf, n_atoms, _ = coords.shape
        x = coords - coords.mean(1, keepdim=True)
        sq = (x * x).sum((1, 2))                                         # ||X_a||^2
        out = torch.empty(n_conf, n_conf, dtype=coords.dtype, device=coords.device)
        for r0 in range(0, n_conf, ROW_BLOCK):
            h = torch.einsum("and,bne->abde", x[r0:r0 + ROW_BLOCK], x)      # cross-covariance [rows, M, 3, 3]
            u, s, vh = torch.linalg.svd(h.double())
            d = torch.sign(torch.linalg.det(u) * torch.linalg.det(vh))    # = sign det(V U^T): no reflections
            trace = s[..., 0] + s[..., 1] + d * s[..., 2]
            e = (sq[r0:r0 + ROW_BLOCK, None].double() + sq[None, :].double() - 2 * trace) / n_atoms
            out[r0:r0 + ROW_BLOCK] = e.clamp_min(0).sqrt().to(coords.dtype)
        return out


def tolerance_scale(inputs, output):
    """Rounding in E = (|Xa|^2 + |Xb|^2 - 2 trace) / N is relative to g = (|Xa|^2 + |Xb|^2) / N; through
    the square root it becomes dE / (RMSD + sqrt(dE)). With dE = u g this returns g / (RMSD + sqrt(u g))."""
    (coords,) = inputs
    x = coords.double() - coords.double().mean(1, keepdim=True)
    sq = (x * x).sum((1, 2))
    g = (sq[:, None] + sq[None, :]) / coords.shape[1]
    return g / (output.double() + torch.sqrt(SCALE_UNIT * g))


def _random_rotations(n, generator):
    q, r = torch.linalg.qr(torch.randn(n, 3, 3, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    q[torch.linalg.det(q) < 0, :, 0] *= -1                               # proper rotations only
    return q


def get_init_inputs(shape):
    return {}


def get_inputs(shape, generator, device):
    n_conf, n_atoms = shape["n_conf"], shape["n_atoms"]
    # a C-alpha-like random walk (3.8 A steps), then conformers = rotated, shifted, perturbed copies
    steps = torch.randn(n_atoms, 3, generator=generator, dtype=torch.float64)
    base = torch.cumsum(3.8 * steps / steps.norm(dim=1, keepdim=True), 0)
    amplitude = torch.exp(torch.empty(n_conf, dtype=torch.float64).uniform_(math.log(0.01), math.log(3.0),
                                                                           generator=generator))
    amplitude[: max(1, n_conf // 16)] = 0.0                                # exact copies up to rigid motion
    noise = torch.randn(n_conf, n_atoms, 3, generator=generator, dtype=torch.float64) * amplitude[:, None, None]
    rot = _random_rotations(n_conf, generator)
    shift = torch.randn(n_conf, 1, 3, generator=generator, dtype=torch.float64) * 20
    coords = torch.einsum("mnd,med->mne", base + noise, rot) + shift
    return (coords.float().to(device),)
