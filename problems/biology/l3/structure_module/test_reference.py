"""Cross-checks for biology/l3/structure_module: NumPy float64 with quaternion products for the frames."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def _ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b


def _qmul(p, q):
    a1, b1, c1, d1 = p
    a2, b2, c2, d2 = q
    return (a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2, a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
            a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2, a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2)


def _rotation_by_conjugation(bcd):
    """Columns R e_k = q e_k q* for the unit quaternion q = (1, b, c, d) / |.|."""
    q = np.array([1.0, *bcd])
    q /= np.linalg.norm(q)
    conj = (q[0], -q[1], -q[2], -q[3])
    cols = [np.array(_qmul(_qmul(tuple(q), (0.0, *np.eye(3)[k])), conj)[1:]) for k in range(3)]
    return np.stack(cols, 1)


def _ipa(p, s, z, rot, trans, mask):
    n = s.shape[0]
    h_n, c, nq, nv = ref.HEADS, ref.C_HEAD, ref.N_QP, ref.N_PV
    w_l, w_c = math.sqrt(1 / 3), math.sqrt(2 / (9 * nq))
    gamma = np.log1p(np.exp(p["ipa_head_weights"]))
    q, k, v = ((s @ p["ipa_w_" + x].T).reshape(n, h_n, c) for x in "qkv")
    glob = {x: np.einsum("rde,rhpe->rhpd", rot, (s @ p["ipa_w_" + x].T).reshape(n, h_n, -1, 3)) + trans[:, None, None]
            for x in ("qp", "kp", "vp")}
    bias = z @ p["ipa_w_b"].T
    feats = np.zeros((n, ref.C_IPA_OUT))
    for h in range(h_n):
        d2 = ((glob["qp"][:, None, h] - glob["kp"][None, :, h]) ** 2).sum((-1, -2))
        lg = w_l * (q[:, h] @ k[:, h].T / math.sqrt(c) + bias[:, :, h] - gamma[h] * w_c / 2 * d2) + 1e9 * (mask[None] - 1)
        a = np.exp(lg - lg.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        o_pt = np.einsum("ij,jpd->ipd", a, glob["vp"][:, h]) - trans[:, None]
        o_pt = np.einsum("ied,ipe->ipd", rot, o_pt)
        feats[:, h * c:(h + 1) * c] = a @ v[:, h]
        base = h_n * c + h * nv
        for d in range(3):
            feats[:, base + d * h_n * nv: base + d * h_n * nv + nv] = o_pt[..., d]
        feats[:, base + 3 * h_n * nv: base + 3 * h_n * nv + nv] = np.sqrt(1e-8 + (o_pt ** 2).sum(-1))
        pair0 = h_n * (c + 4 * nv) + h * ref.C_Z
        feats[:, pair0:pair0 + ref.C_Z] = np.einsum("ij,ijc->ic", a, z)
    return feats @ p["ipa_w_out"].T + p["ipa_b_out"]


def numpy_structure_module(s_init, z, mask, **w):
    p = {k: v.double().numpy() for k, v in w.items()}
    outs = ([], [], [])
    for b in range(s_init.shape[0]):
        s = _ln(s_init[b].double().numpy(), p["ln_s_init_w"], p["ln_s_init_b"]) @ p["w_in"].T + p["b_in"]
        zz = _ln(z[b].double().numpy(), p["ln_z_w"], p["ln_z_b"])
        m = mask[b].double().numpy()
        n = s.shape[0]
        rot, trans = np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3))
        for _ in range(ref.N_ITER):
            s = _ln(s + _ipa(p, s, zz, rot, trans, m), p["ln_ipa_w"], p["ln_ipa_b"])
            h = np.maximum(s @ p["tr_w1"].T + p["tr_b1"], 0)
            h = np.maximum(h @ p["tr_w2"].T + p["tr_b2"], 0)
            s = _ln(s + h @ p["tr_w3"].T + p["tr_b3"], p["ln_tr_w"], p["ln_tr_b"])
            upd = s @ p["bb_w"].T + p["bb_b"]
            new_rot = np.stack([rot[i] @ _rotation_by_conjugation(upd[i, :3]) for i in range(n)])
            trans = np.einsum("rde,re->rd", rot, upd[:, 3:]) + trans
            rot = new_rot
        for o, x in zip(outs, (s, rot, trans)):
            o.append(x)
    return tuple(torch.from_numpy(np.stack(o)) for o in outs)


def test_matches_numpy_quaternion_products():
    case.check_against({"batch": 2, "n_res": 7}, numpy_structure_module)


def test_frames_stay_proper_rotations():
    _, rot, trans = ref.Model(**case.problem.init_inputs({}))(*case.problem.inputs({"batch": 1, "n_res": 20}, 1, "cpu"))
    torch.testing.assert_close(rot @ rot.transpose(-1, -2), torch.eye(3).expand_as(rot), atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.linalg.det(rot), torch.ones(rot.shape[:2]), atol=1e-5, rtol=0)
    assert float(trans.abs().max()) > 0.1


def test_degeneracy():
    weights = [k for k in case.problem.init_inputs({}) if "_w" in k and not k.startswith("ln")]
    case.check_degeneracy({"batch": 1, "n_res": 16}, init_perturbable=weights)


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_res": 96}
    case.check_calibration(shape)
