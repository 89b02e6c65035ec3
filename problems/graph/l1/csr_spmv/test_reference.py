"""Cross-checks for graph/l1/csr_spmv: scipy.sparse in float64 and a plain loop."""
import numpy as np
import scipy.sparse
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_spmv(rowptr, col, val, x):
    n = rowptr.numel() - 1
    a = scipy.sparse.csr_matrix((val.double().numpy(), col.numpy(), rowptr.numpy()), shape=(n, n))
    return torch.from_numpy(a @ x.double().numpy())


def test_matches_scipy():
    case.check_against(case.small_shape(), scipy_spmv)


def test_matches_plain_loop_with_empty_rows():
    rowptr = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    col = torch.tensor([0, 2, 0, 1, 2], dtype=torch.int32)
    val = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    x = torch.tensor([1.0, 10.0, 100.0])
    y = case.problem.module.Model()(rowptr, col, val, x)
    assert y.tolist() == [201.0, 0.0, 543.0]


def test_inputs_are_valid_csr():
    rowptr, col, val, x = case.problem.inputs(case.min_shape(), 0, "cpu")
    n = x.numel()
    assert rowptr[0] == 0 and rowptr[-1] == col.numel() == val.numel()
    assert bool((rowptr[1:] >= rowptr[:-1]).all()) and int(col.max()) < n
    lengths = (rowptr[1:] - rowptr[:-1]).numpy()
    assert lengths.max() > 4 * max(lengths.mean(), 1), "row lengths should be heavy-tailed"


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_rows": 200000, "avg_degree": 64, "alpha": 1.8}
    max_abs, rel = case.drift(shape)
    assert rel * 5 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
    assert np.isfinite(max_abs)
