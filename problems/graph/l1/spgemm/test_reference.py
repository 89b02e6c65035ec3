"""Cross-checks for graph/l1/spgemm: scipy.sparse in float64 and a plain Gustavson loop."""
import scipy.sparse
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_spgemm(a_rowptr, a_col, a_val, b_rowptr, b_col, b_val):
    n = a_rowptr.numel() - 1
    a = scipy.sparse.csr_matrix((a_val.double().numpy(), a_col.numpy(), a_rowptr.numpy()), shape=(n, n))
    b = scipy.sparse.csr_matrix((b_val.double().numpy(), b_col.numpy(), b_rowptr.numpy()), shape=(n, n))
    c = (a @ b).tocsr()
    c.sort_indices()
    return torch.from_numpy(c.indptr.astype("int64")), torch.from_numpy(c.indices.astype("int64")), \
        torch.from_numpy(c.data)


def gustavson_loop(a_rowptr, a_col, a_val, b_rowptr, b_col, b_val):
    """Row i of C accumulates a_ik * (row k of B) in a dict; columns sorted at the end."""
    crow, cols, vals = [0], [], []
    for i in range(a_rowptr.numel() - 1):
        acc = {}
        for p in range(int(a_rowptr[i]), int(a_rowptr[i + 1])):
            k = int(a_col[p])
            for q in range(int(b_rowptr[k]), int(b_rowptr[k + 1])):
                j = int(b_col[q])
                acc[j] = acc.get(j, 0.0) + float(a_val[p]) * float(b_val[q])
        for j in sorted(acc):
            cols.append(j)
            vals.append(acc[j])
        crow.append(len(cols))
    return torch.tensor(crow), torch.tensor(cols, dtype=torch.long), torch.tensor(vals, dtype=torch.float64)


def test_matches_scipy():
    case.check_against(case.small_shape(), scipy_spgemm)


def test_matches_plain_loop():
    case.check_against({"n": 1024, "avg_degree": 4, "alpha": 2.0}, gustavson_loop)


def test_empty_rows_and_hand_example():
    # A = [[1, 2, 0], [0, 0, 0], [0, 3, 1]] (row 1 empty), B = [[0, 1, 0], [1, 0, 1], [0, 0, 0]] (row 2 empty)
    a = (torch.tensor([0, 2, 2, 4]), torch.tensor([0, 1, 1, 2]), torch.tensor([1.0, 2.0, 3.0, 1.0]))
    b = (torch.tensor([0, 1, 3, 3]), torch.tensor([1, 0, 2]), torch.tensor([1.0, 1.0, 1.0]))
    crow, col, val = case.problem.module.Model()(*a, *b)
    # C = [[2, 1, 2], [0, 0, 0], [3, 0, 3]]
    assert crow.tolist() == [0, 3, 3, 5]
    assert col.tolist() == [0, 1, 2, 0, 2]
    assert val.tolist() == [2.0, 1.0, 2.0, 3.0, 3.0]


def test_inputs_are_power_law_csr():
    a_rowptr, a_col, a_val, b_rowptr, b_col, b_val = case.problem.inputs(case.small_shape(), 0, "cpu")
    n = a_rowptr.numel() - 1
    assert a_rowptr[-1] == a_col.numel() == a_val.numel() and int(a_col.max()) < n
    rows = torch.repeat_interleave(torch.arange(n), a_rowptr[1:] - a_rowptr[:-1])
    key = rows * n + a_col
    assert bool((key[1:] > key[:-1]).all()), "columns sorted and unique within each row"
    assert float(a_val.min()) >= 0.5 and float(a_val.max()) < 1.5 and not torch.equal(a_val, b_val)
    lengths = a_rowptr[1:] - a_rowptr[:-1]
    assert int(lengths.max()) > 20 * float(lengths.float().mean()), "row lengths should be heavy-tailed"


def test_output_is_canonical_csr():
    inputs, (crow, col, val) = case.run(case.small_shape())
    n = crow.numel() - 1
    rows = torch.repeat_interleave(torch.arange(n), crow[1:] - crow[:-1])
    key = rows * n + col
    assert bool((key[1:] > key[:-1]).all()) and bool((val > 0).all())


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n": 65536, "avg_degree": 16, "alpha": 2.0}  # the recorded drift is at n = 262144
    max_abs, rel = case.drift(shape)
    assert rel * 10 <= case.tolerance["rel_norm_max"], f"fp32 drift {rel} too close to the guard"
    case.check_calibration(shape)
