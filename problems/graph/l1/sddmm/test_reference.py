"""Cross-checks for graph/l1/sddmm: a float64 NumPy loop over rows and a hand-computed example."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def numpy_sddmm(rowptr, col, val, X, Y):
    rowptr, col, val = rowptr.numpy(), col.numpy(), val.double().numpy()
    X, Y = X.double().numpy(), Y.double().numpy()
    out = np.empty(val.shape)
    for i in range(len(rowptr) - 1):
        p = slice(rowptr[i], rowptr[i + 1])
        out[p] = val[p] * (Y[col[p]] @ X[i])
    return torch.from_numpy(out)


def test_matches_numpy_loop():
    case.check_against(case.small_shape(), numpy_sddmm)


def test_matches_numpy_loop_at_odd_width():
    case.check_against({"n_rows": 300, "avg_degree": 5, "feat": 13}, numpy_sddmm, seed=3)


def test_hand_computed():
    rowptr = torch.tensor([0, 2, 3], dtype=torch.int32)
    col = torch.tensor([0, 1, 1], dtype=torch.int32)
    val = torch.tensor([1.0, 2.0, -1.0])
    X = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    Y = torch.tensor([[5.0, 6.0], [7.0, 8.0]])
    out = case.problem.module.Model()(rowptr, col, val, X, Y)
    assert out.tolist() == [17.0, 2 * 23.0, -53.0]


def test_chunking_matches_single_pass(monkeypatch):
    module = case.problem.module
    inputs, ref = case.run(case.small_shape())
    monkeypatch.setattr(module, "CHUNK", 1000)  # several chunks plus a ragged tail
    with torch.no_grad():
        chunked = module.Model()(*inputs)
    assert torch.equal(chunked, ref)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_rows": 8000, "avg_degree": 32, "feat": 256}
    max_abs, rel = case.drift(shape)
    assert rel * 10 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
