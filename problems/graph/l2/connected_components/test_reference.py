"""Cross-checks for graph/l2/connected_components: scipy.sparse.csgraph and a hand-made graph."""
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def scipy_canonical_labels(rowptr, col):
    n = rowptr.numel() - 1
    a = scipy.sparse.csr_matrix((np.ones(col.numel()), col.numpy(), rowptr.numpy()), shape=(n, n))
    _, comp = scipy.sparse.csgraph.connected_components(a, directed=False)
    smallest = np.full(comp.max() + 1, n)
    np.minimum.at(smallest, comp, np.arange(n))
    return torch.from_numpy(smallest[comp])


def test_matches_scipy():
    case.check_against(case.small_shape(), scipy_canonical_labels)


def test_matches_scipy_with_sparse_giant():
    case.check_against({"n": 5000, "avg_degree": 2, "giant_frac": 0.3}, scipy_canonical_labels, seed=2)


def test_hand_made_graph():
    # components {0, 3, 5} (a path 5 - 0 - 3 would need two rounds without jumping), {1, 4}, {2}
    edges = [(0, 3), (0, 5), (1, 4)]
    n = 6
    adj = [sorted([b for a, b in edges if a == v] + [a for a, b in edges if b == v]) for v in range(n)]
    rowptr = torch.tensor(np.cumsum([0] + [len(x) for x in adj]))
    col = torch.tensor([c for x in adj for c in x])
    assert case.problem.module.Model()(rowptr, col).tolist() == [0, 1, 2, 0, 1, 0]


def test_inputs_have_many_components_and_a_giant():
    rowptr, col = case.problem.inputs(case.small_shape(), 0, "cpu")
    labels = scipy_canonical_labels(rowptr, col)
    counts = torch.bincount(labels)
    counts = counts[counts > 0]
    assert counts.numel() > 100 and int(counts.max()) > 0.5 * labels.numel()


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
