"""Cross-checks for graph/l1/csr_spmm: scipy.sparse in float64 and a hand-computed example."""
import scipy.sparse
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_spmm(rowptr, col, val, X):
    n = rowptr.numel() - 1
    a = scipy.sparse.csr_matrix((val.double().numpy(), col.numpy(), rowptr.numpy()), shape=(n, n))
    return torch.from_numpy(a @ X.double().numpy())


def test_matches_scipy():
    case.check_against(case.small_shape(), scipy_spmm)


def test_matches_scipy_at_odd_width():
    case.check_against({"n_rows": 300, "avg_degree": 7, "feat": 13, "alpha": 1.8}, scipy_spmm, seed=5)


def test_hand_computed_with_empty_row():
    rowptr = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    col = torch.tensor([0, 2, 0, 1, 2], dtype=torch.int32)
    val = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    X = torch.tensor([[1.0, -1.0], [10.0, 0.5], [100.0, 2.0]])
    Y = case.problem.module.Model()(rowptr, col, val, X)
    assert Y.tolist() == [[201.0, 3.0], [0.0, 0.0], [543.0, 9.0]]


def test_row_lengths_are_heavy_tailed():
    rowptr, col, val, X = case.problem.inputs(case.small_shape(), 0, "cpu")
    lengths = (rowptr[1:] - rowptr[:-1]).double()
    assert rowptr[-1] == col.numel() and lengths.max() > 4 * lengths.mean()


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_rows": 50000, "avg_degree": 64, "feat": 64, "alpha": 1.8}
    max_abs, rel = case.drift(shape)
    assert rel * 10 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
