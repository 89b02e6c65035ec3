"""Cross-checks for biology/l3/evoformer_block: the supplement's algorithms written out in NumPy float64.

The NumPy version follows Alg. 6-15 index by index (the ending-node attention and the incoming
triangle update are written directly, not as transposes), so it checks the reference's
transpose tricks as well as its arithmetic.
"""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module
H_C = ref.C_HEAD


def _ln(p, name, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * p[name + "_ln_w"] + p[name + "_ln_b"]


def _lin(p, name, x, bias=True):
    return x @ p[name + "_w"].T + (p[name + "_b"] if bias else 0.0)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _heads(t, heads):
    return t.reshape(t.shape[:-1] + (heads, H_C))


def _qkv(p, name, x, heads):
    qkv = x @ p[name + "_qkv_w"].T
    n = heads * H_C
    return _heads(qkv[..., :n], heads), _heads(qkv[..., n:2 * n], heads), _heads(qkv[..., 2 * n:], heads)


def _finish(p, name, x, o, heads):
    g = _heads(_sig(_lin(p, name + "_gate", x)), heads)
    return _lin(p, name + "_out", (g * o).reshape(o.shape[:-2] + (heads * H_C,)))


def msa_row_attention(p, m, mask, z):  # Alg. 7
    x = _ln(p, "row", m)
    q, k, v = _qkv(p, "row", x, 8)                             # [S,R,H,c]
    bias = _ln(p, "row_bias", z) @ p["row_bias_w"].T           # [R,R,H]
    o = np.zeros_like(q)
    for s in range(m.shape[0]):
        for h in range(8):
            lg = q[s, :, h] @ k[s, :, h].T / np.sqrt(H_C) + bias[:, :, h] + 1e9 * (mask[s][None, :] - 1)
            o[s, :, h] = _softmax(lg) @ v[s, :, h]
    return _finish(p, "row", x, o, 8)


def msa_column_attention(p, m, mask):  # Alg. 8
    x = _ln(p, "col", m)
    q, k, v = _qkv(p, "col", x, 8)
    o = np.zeros_like(q)
    for i in range(m.shape[1]):
        for h in range(8):
            lg = q[:, i, h] @ k[:, i, h].T / np.sqrt(H_C) + 1e9 * (mask[:, i][None, :] - 1)
            o[:, i, h] = _softmax(lg) @ v[:, i, h]
    return _finish(p, "col", x, o, 8)


def transition(p, name, x):  # Alg. 9 / 15
    hidden = np.maximum(_ln(p, name, x) @ p[name + "_w1"].T + p[name + "_b1"], 0)
    return hidden @ p[name + "_w2"].T + p[name + "_b2"]


def outer_product_mean(p, m, mask):  # Alg. 10, mean before the Linear
    ab = (_ln(p, "opm", m) @ p["opm_ab_w"].T + p["opm_ab_b"]) * mask[..., None]
    a, b = ab[..., :32], ab[..., 32:]
    n_res = m.shape[1]
    out = np.zeros((n_res, n_res, p["opm_out_b"].shape[0]))
    for i in range(n_res):
        for j in range(n_res):
            outer = a[:, i, :, None] * b[:, j, None, :]            # [S, c, c]
            norm = 1e-3 + float((mask[:, i] * mask[:, j]).sum())
            out[i, j] = (outer.sum(0) / norm).reshape(-1) @ p["opm_out_w"].T + p["opm_out_b"]
    return out


def triangle_multiply(p, name, z, mask, outgoing):  # Alg. 11 / 12 written index by index
    x = _ln(p, name, z)
    proj = x @ p[name + "_ab_w"].T + p[name + "_ab_b"]
    c = proj.shape[-1] // 4
    a = mask[..., None] * _sig(proj[..., :c]) * proj[..., c:2 * c]
    b = mask[..., None] * _sig(proj[..., 2 * c:3 * c]) * proj[..., 3 * c:]
    n = z.shape[0]
    t = np.zeros((n, n, c))
    for i in range(n):
        for j in range(n):
            t[i, j] = (a[i, :] * b[j, :]).sum(0) if outgoing else (a[:, i] * b[:, j]).sum(0)
    g = _sig(_lin(p, name + "_g", x))
    t_hat = (t - t.mean(-1, keepdims=True)) / np.sqrt(t.var(-1, keepdims=True) + 1e-5)
    return g * ((t_hat * p[name + "_lnx_w"] + p[name + "_lnx_b"]) @ p[name + "_o_w"].T + p[name + "_o_b"])


def triangle_attention(p, name, z, mask, starting):  # Alg. 13 / 14
    x = _ln(p, name, z)
    q, k, v = _qkv(p, name, x, 4)
    bias = x @ p[name + "_bias_w"].T                          # [R,R,H]
    o = np.zeros_like(q)
    n = z.shape[0]
    for i in range(n):
        for h in range(4):
            if starting:   # row i: a_ijk = softmax_k(q_ij . k_ik + b_jk), keys masked by mask_ik
                lg = q[i, :, h] @ k[i, :, h].T / np.sqrt(H_C) + bias[:, :, h] + 1e9 * (mask[i][None, :] - 1)
                o[i, :, h] = _softmax(lg) @ v[i, :, h]
            else:          # column j = i: a_ijk = softmax_k(q_ij . k_kj + b_ki), keys masked by mask_kj
                j = i
                lg = q[:, j, h] @ k[:, j, h].T / np.sqrt(H_C) + bias[:, :, h].T + 1e9 * (mask[:, j][None, :] - 1)
                o[:, j, h] = _softmax(lg) @ v[:, j, h]
    return _finish(p, name, x, o, 4)


def numpy_evoformer(m, z, msa_mask, pair_mask, **weights):
    p = {k: v.double().numpy() for k, v in weights.items()}
    outs_m, outs_z = [], []
    for bi in range(m.shape[0]):
        mm, zz = m[bi].double().numpy(), z[bi].double().numpy()
        mk, pk = msa_mask[bi].double().numpy(), pair_mask[bi].double().numpy()
        mm = mm + msa_row_attention(p, mm, mk, zz)
        mm = mm + msa_column_attention(p, mm, mk)
        mm = mm + transition(p, "msa_tr", mm)
        zz = zz + outer_product_mean(p, mm, mk)
        zz = zz + triangle_multiply(p, "tri_out", zz, pk, outgoing=True)
        zz = zz + triangle_multiply(p, "tri_in", zz, pk, outgoing=False)
        zz = zz + triangle_attention(p, "tri_start", zz, pk, starting=True)
        zz = zz + triangle_attention(p, "tri_end", zz, pk, starting=False)
        zz = zz + transition(p, "pair_tr", zz)
        outs_m.append(mm)
        outs_z.append(zz)
    return torch.from_numpy(np.stack(outs_m)), torch.from_numpy(np.stack(outs_z))


def test_matches_numpy_algorithms():
    case.check_against({"batch": 1, "n_seq": 5, "n_res": 9}, numpy_evoformer)


def test_matches_numpy_with_masked_pairs():
    shape = {"batch": 2, "n_seq": 4, "n_res": 7}
    m, z, msa_mask, pair_mask = case.problem.inputs(shape, 3, "cpu")
    pair_mask = (torch.rand(pair_mask.shape, generator=torch.Generator().manual_seed(0)) > 0.2).float()
    pair_mask[:, :, 0] = 1  # every attention row keeps a key
    pair_mask[:, 0, :] = 1
    init = case.problem.init_inputs(shape)
    got = ref.Model(**init).double()(m.double(), z.double(), msa_mask.double(), pair_mask.double())
    want = numpy_evoformer(m, z, msa_mask, pair_mask, **init)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-9, rtol=1e-9)


def test_degeneracy():
    # inputs here; a 10% nudge of one of the 71 weights moves the output by 1e-4..1e-1, mostly
    # inside the bf16-sized tolerance, so weights are checked against a tighter bar below
    case.check_degeneracy({"batch": 1, "n_seq": 6, "n_res": 12}, init_perturbable=[])


def test_every_weight_matters():
    shape = {"batch": 1, "n_seq": 4, "n_res": 8}
    inputs = case.problem.inputs(shape, 1, "cpu")
    init = case.problem.init_inputs(shape)
    base = ref.Model(**init)(*inputs)
    gen = torch.Generator().manual_seed(3)
    for name, w in init.items():
        if name == "row_bias_ln_b":
            continue  # adds the same constant to every logit of a softmax row: provably no effect
        moved = ref.Model(**{**init, name: w + 0.1 * w.abs().mean() * torch.randn(w.shape, generator=gen)})(*inputs)
        change = max(float((a - b).abs().max()) for a, b in zip(moved, base))
        assert change > 1e-4, f"output does not depend on {name}"


def test_tolerance_calibrated():
    shape = {"batch": 1, "n_seq": 16, "n_res": 48}
    max_abs, rel = case.drift(shape)
    assert max_abs * 10 <= case.tolerance["atol"] and rel * 10 <= case.tolerance["rel_norm_max"]
    case.check_calibration(shape)
