"""Cross-checks for biology/l3/distributed_kmer_counting: every rank's owned k-mers (gloo, 2
and 3 processes) against a plain-Python Counter of canonical k-mer strings over all reads."""
from collections import Counter

import pytest
import torch

from orchestrator.runner.cbrng import owner_of
from orchestrator.runner.compare import compare_outputs, zeros_like_output
from orchestrator.runner.distributed import run_reference_ranks
from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
SHAPE = {"reads_per_rank": 150, "read_len": 60, "k": 21, "error_rate": 0.01}
COMPLEMENT = str.maketrans("ACGT", "TGCA")


def code_of(kmer):
    return int(kmer.translate(str.maketrans("ACGT", "0123")), 4)


def python_counts(shape, seed, world_size):
    k = shape["k"]
    counter = Counter()
    for r in range(world_size):
        (reads,) = case.problem.inputs(shape, seed, "cpu", rank=r, world_size=world_size)
        for read in reads.tolist():
            s = "".join("ACGTN"[b] for b in read)
            for i in range(len(s) - k + 1):
                w = s[i:i + k]
                if "N" not in w:
                    counter[min(code_of(w), code_of(w.translate(COMPLEMENT)[::-1]))] += 1
    kept = sorted(c for c, n in counter.items() if n >= 2)
    codes = torch.tensor(kept, dtype=torch.int64)
    counts = torch.tensor([counter[c] for c in kept], dtype=torch.int32)
    owners = owner_of(codes, world_size)
    return [(codes[owners == r], counts[owners == r]) for r in range(world_size)], counter


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request):
    w = request.param
    return w, run_reference_ranks(str(case.problem.directory), SHAPE, 4, w)


def test_every_rank_matches_python_counter(ranks):
    w, outs = ranks
    expected, counter = python_counts(SHAPE, 4, w)
    for r, ((codes, counts), (exp_codes, exp_counts)) in enumerate(zip(outs, expected)):
        assert codes.dtype == torch.int64 and counts.dtype == torch.int32
        assert torch.equal(codes, exp_codes) and torch.equal(counts, exp_counts), f"rank {r}"
        assert codes.numel() > 100, "too few repeated k-mers to test anything"
    singletons = sum(1 for n in counter.values() if n == 1)
    assert singletons > 0, "sequencing errors should create singleton k-mers that min_count drops"


def test_degeneracy(ranks):
    w, outs = ranks
    other, _ = python_counts(SHAPE, 5, w)
    for out, alt in zip(outs, other):
        assert not compare_outputs(zeros_like_output(out), out, case.tolerance).passed
        assert not compare_outputs(alt, out, case.tolerance).passed
