"""Cross-checks for graph/l1/bfs_level_expand: a plain push loop and a pull over the CSC."""
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)


def push_loop(rowptr, col, colptr, row, frontier, visited):
    n = rowptr.numel() - 1
    parent = [-1] * n
    rowptr, col, frontier, visited = rowptr.tolist(), col.tolist(), frontier.tolist(), visited.tolist()
    for u in range(n):  # increasing u: the first writer is the smallest parent
        if frontier[u]:
            for v in col[rowptr[u]:rowptr[u + 1]]:
                if not visited[v] and parent[v] < 0:
                    parent[v] = u
    parent = torch.tensor(parent)
    return parent >= 0, parent


def pull_through_csc(rowptr, col, colptr, row, frontier, visited):
    n = colptr.numel() - 1
    parent = torch.full((n,), -1)
    for v in (~visited).nonzero().squeeze(1).tolist():
        ins = row[colptr[v]:colptr[v + 1]].long()
        ins = ins[frontier[ins]]
        if ins.numel():
            parent[v] = int(ins.min())
    return parent >= 0, parent


def test_matches_push_loop():
    case.check_against(case.small_shape(), push_loop)


def test_matches_pull_through_csc():
    case.check_against({"n": 3000, "avg_degree": 8, "frontier_frac": 0.3, "visited_frac": 0.5}, pull_through_csc, seed=2)


def test_inputs_are_consistent():
    rowptr, col, colptr, row, frontier, visited = case.problem.inputs(case.small_shape(), 0, "cpu")
    assert bool((visited | ~frontier).all()) and int(frontier.sum()) > 0
    n = rowptr.numel() - 1
    out_edges = torch.repeat_interleave(torch.arange(n), (rowptr[1:] - rowptr[:-1]).long()) * n + col
    in_edges = row.long() * n + torch.repeat_interleave(torch.arange(n), (colptr[1:] - colptr[:-1]).long())
    assert torch.equal(torch.sort(out_edges).values, torch.sort(in_edges).values)


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
