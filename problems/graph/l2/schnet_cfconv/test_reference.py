"""Cross-checks for graph/l2/schnet_cfconv: a float64 NumPy loop over KD-tree neighbourhoods."""
import math

import numpy as np
import scipy.spatial
import torch

from orchestrator.runner.compare import compare_outputs
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def _ssp(z):
    return np.logaddexp(0.0, z) - math.log(2.0)


def numpy_cfconv(h, pos, edge_index, w1, b1, w2, b2, w_in, w_o1, b_o1, w_o2, b_o2):
    w = {k: v.double().numpy() for k, v in dict(w1=w1, b1=b1, w2=w2, b2=b2, w_in=w_in, w_o1=w_o1,
                                                 b_o1=b_o1, w_o2=w_o2, b_o2=b_o2).items()}
    h, pos = h.double().numpy(), pos.double().numpy()
    cutoff = case.problem.module.CUTOFF
    mu = np.linspace(0.0, cutoff, w["w1"].shape[0])
    x = h @ w["w_in"]
    m = np.zeros_like(x)
    tree = scipy.spatial.cKDTree(pos)
    for i, neighbours in enumerate(tree.query_ball_point(pos, r=cutoff)):
        for j in neighbours:
            if j == i:
                continue
            d = np.linalg.norm(pos[j] - pos[i])
            rbf = np.exp(-10.0 * (d - mu) ** 2)
            filt = (_ssp(rbf @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]) * 0.5 * (math.cos(math.pi * d / cutoff) + 1)
            m[i] += x[j] * filt
    return torch.from_numpy(_ssp(m @ w["w_o1"] + w["b_o1"]) @ w["w_o2"] + w["b_o2"])


def test_matches_numpy_kdtree_loop():
    case.check_against({"n_atoms": 256, "avg_neighbors": 20, "feat": 16, "n_rbf": 16}, numpy_cfconv)


def test_neighbour_count_near_target():
    h, pos, edge_index = case.problem.inputs(case.small_shape(), 0, "cpu")
    mean = edge_index.shape[1] / h.shape[0]
    assert 0.5 * 32 < mean < 1.1 * 32
    assert bool((edge_index[1][1:] >= edge_index[1][:-1]).all())


def truncate_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 with the low 13 mantissa bits dropped: what Hopper tensor cores read from fp32 operands."""
    return (t.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


class TruncatedTF32(torch.overrides.TorchFunctionMode):
    """Every matrix product of the code inside sees TF32-truncated operands."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.__matmul__, torch.matmul, torch.Tensor.matmul, torch.mm):
            args = tuple(truncate_to_tf32(a) if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a
                         for a in args)
        return func(*args, **(kwargs or {}))


def test_tolerance_admits_truncated_tf32():
    """Issue 5: the TF32 oracle failed on the H200 (3.8e-3 against atol = rtol = 2e-3, which had
    been set from round-to-nearest TF32). Truncated-TF32 GEMMs must pass with a 2x margin."""
    shape = {"n_atoms": 1024, "avg_neighbors": 64, "feat": 256, "n_rbf": 128}
    inputs, expected = case.run(shape, dtype=torch.float64)
    model = case.problem.model(shape, "cpu")
    with torch.no_grad(), TruncatedTF32():
        out = model(*case.problem.inputs(shape, 0, "cpu"))
    tol = case.tolerance
    assert compare_outputs(out, expected.float(), tol).passed
    worst = float(((out.double() - expected).abs() / (1 + expected.abs())).max())
    assert 1e-4 < worst <= min(tol["atol"], tol["rtol"]) / 2, worst    # TF32 really emulated, margin kept
    assert float((out.double() - expected).norm() / expected.norm()) <= tol["rel_norm_max"] / 2


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_atoms": 8192, "avg_neighbors": 64, "feat": 128, "n_rbf": 50}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} too close to atol"
    case.check_calibration(shape)
