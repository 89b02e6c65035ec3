"""Cross-checks for biology/l2/invariant_point_attention: NumPy float64 loops, rigid-motion invariance."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_ipa(s, z, rot, trans, mask, w_q, w_k, w_v, w_qp, w_kp, w_vp, w_b, head_weights, w_out, b_out):
    s, z, rot, trans, mask = (t.double().numpy() for t in (s, z, rot, trans, mask))
    w = {k: v.double().numpy() for k, v in dict(q=w_q, k=w_k, v=w_v, qp=w_qp, kp=w_kp, vp=w_vp, b=w_b,
                                                 o=w_out, bo=b_out).items()}
    gamma = np.log1p(np.exp(head_weights.double().numpy()))
    h_n, c, nq, nv = ref.HEADS, ref.C_HEAD, ref.N_QP, ref.N_PV
    w_l, w_c = math.sqrt(1 / 3), math.sqrt(2 / (9 * nq))
    out = np.zeros((s.shape[0], s.shape[1], ref.C_S))
    for b in range(s.shape[0]):
        n = s.shape[1]
        q, k, v = ((s[b] @ w[x].T).reshape(n, h_n, c) for x in "qkv")
        pts = {x: (s[b] @ w[x].T).reshape(n, h_n, -1, 3) for x in ("qp", "kp", "vp")}
        glob = {x: np.einsum("rde,rhpe->rhpd", rot[b], p) + trans[b][:, None, None, :] for x, p in pts.items()}
        bias = z[b] @ w["b"].T
        for i in range(n):
            feats = [[], [], [], [], [], []]
            for h in range(h_n):
                lg = np.array([w_l * (q[i, h] @ k[j, h] / math.sqrt(c) + bias[i, j, h]
                                      - gamma[h] * w_c / 2 * ((glob["qp"][i, h] - glob["kp"][j, h]) ** 2).sum())
                               + 1e9 * (mask[b, j] - 1) for j in range(n)])
                a = np.exp(lg - lg.max())
                a /= a.sum()
                o_pt = rot[b, i].T @ ((a[:, None, None] * glob["vp"][:, h]).sum(0) - trans[b, i]).T   # [3, nv]
                feats[0].append(a @ v[:, h])
                for d in range(3):
                    feats[1 + d].append(o_pt[d])
                feats[4].append(np.sqrt(1e-8 + (o_pt ** 2).sum(0)))
                feats[5].append(a @ z[b, i])
            row = np.concatenate([np.concatenate(f) for f in feats])
            out[b, i] = row @ w["o"].T + w["bo"]
    return torch.from_numpy(out)


def test_matches_numpy_loops():
    case.check_against({"batch": 2, "n_res": 9}, numpy_ipa)


def test_invariant_under_global_rigid_motion():
    shape = {"batch": 1, "n_res": 20}
    s, z, rot, trans, mask = case.problem.inputs(shape, 3, "cpu")
    model = ref.Model(**case.problem.init_inputs(shape))
    c, sn = math.cos(1.1), math.sin(1.1)
    g = torch.tensor([[c, 0.0, sn], [0.0, 1.0, 0.0], [-sn, 0.0, c]])
    moved = model(s, z, g @ rot, trans @ g.T + torch.tensor([1.0, -2.0, 0.5]), mask)
    torch.testing.assert_close(moved, model(s, z, rot, trans, mask), atol=2e-5, rtol=1e-4)


def test_degeneracy():
    case.check_degeneracy({"batch": 1, "n_res": 24})


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_res": 128}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
