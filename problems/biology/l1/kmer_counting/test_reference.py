"""Cross-checks for biology/l1/kmer_counting: a plain Python k-mer counter on strings."""
from collections import Counter

import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
COMPLEMENT = str.maketrans("ACGT", "TGCA")


def python_counts(reads, k):
    counts = Counter()
    for row in reads.tolist():
        seq = "".join("ACGTN"[b] for b in row)
        for p in range(len(seq) - k + 1):
            kmer = seq[p:p + k]
            if "N" not in kmer:
                counts[min(kmer, kmer.translate(COMPLEMENT)[::-1])] += 1  # ACGT order = code order
    out = torch.zeros(4 ** k, dtype=torch.int32)
    for kmer, n in counts.items():
        out[int(kmer.translate(str.maketrans("ACGT", "0123")), 4)] = n
    return out


def test_matches_python_counter():
    shape = {"n_reads": 60, "read_len": 57, "k": 6, "n_rate": 0.02, "repeat_frac": 0.3}
    case.check_against(shape, python_counts)


def test_chunking_and_total():
    shape = {"n_reads": ref.READ_CHUNK + 7, "read_len": 20, "k": 5, "n_rate": 0.01, "repeat_frac": 0.1}
    (reads,) = case.problem.inputs(shape, 1, "cpu")
    counts = ref.Model(k=5)(reads)
    windows_without_n = (reads.long().unfold(1, 5, 1) < 4).all(-1).sum()
    assert int(counts.sum()) == int(windows_without_n)
    # a k-mer and its reverse complement share one bin: ACGTA (code 108) vs TACGT (code 795)
    assert int(counts[795]) == 0 or int(counts[108]) == 0


def test_palindrome_and_n_windows():
    reads = torch.tensor([[0, 1, 2, 3, 0, 4, 1, 1]], dtype=torch.uint8)  # ACGTANCC, k = 4
    counts = ref.Model(k=4)(reads)
    # ACGT is its own reverse complement (code 27); CGTA -> TACG: min is CGTA (code 108); the rest hold N
    assert counts.nonzero().flatten().tolist() == [27, 108] and counts.sum() == 2


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
