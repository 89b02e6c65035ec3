"""Cross-checks for biology/l1/pwm_motif_scan: a plain Python scan with an explicit reverse complement."""
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def python_scan(seqs, pwm, widths, thresholds):
    best, best_pos, hits = [], [], []
    p = pwm.tolist()
    for row in seqs.tolist():
        rc_row = [3 - b for b in reversed(row)]
        b_row, pos_row, hit_row = [], [], []
        for m, w in enumerate(widths.tolist()):
            top, top_idx, n = float("-inf"), -1, 0
            for start in range(len(row) - w + 1):
                fwd = sum(p[m][t][row[start + t]] for t in range(w))
                # reverse strand at p: the motif read on the reverse complement of x[p:p+w]
                rc_start = len(row) - start - w
                rev = sum(p[m][t][rc_row[rc_start + t]] for t in range(w))
                for strand, score in ((0, fwd), (1, rev)):
                    if score > top:
                        top, top_idx = score, 2 * start + strand
                    n += score >= float(thresholds[m])
            b_row.append(top)
            pos_row.append(top_idx)
            hit_row.append(n)
        best.append(b_row)
        best_pos.append(pos_row)
        hits.append(hit_row)
    return torch.tensor(best), torch.tensor(best_pos, dtype=torch.int32), torch.tensor(hits, dtype=torch.int32)


def test_matches_python_scan():
    case.check_against({"n_seqs": 4, "seq_len": 40, "n_motifs": 5, "max_width": 9}, python_scan)


def test_ties_pick_the_first_position_forward_first():
    pwm = torch.zeros(1, 2, 4)
    pwm[0, 0, 0] = pwm[0, 1, 3] = 1.0            # motif AT, its own reverse complement
    model = ref.Model(pwm, torch.tensor([2], dtype=torch.int32), torch.tensor([2.0]))
    best, pos, hits = model(torch.tensor([[2, 0, 3, 0, 3]], dtype=torch.uint8))  # G A T A T
    assert best.tolist() == [[2.0]] and pos.tolist() == [[2]] and hits.tolist() == [[4]]


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_float64_run_is_identical():
    case.check_calibration(case.small_shape())
    max_abs, _ = case.drift(case.small_shape())
    assert max_abs == 0.0
