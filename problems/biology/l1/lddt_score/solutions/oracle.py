"""Oracle for biology/l1/lddt_score: one pass over residue-pair tiles, no [B, L, L] temporaries.

Each program owns a block of residues i of one structure, streams the residues j, computes both
distances, the inclusion mask and the threshold fraction in registers, and writes the per-residue
numerator and denominator; the global score is their sum (fp32 sums of multiples of 0.25, exact).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _lddt_rows(pred, true, mask, per_res, num_out, den_out, n_res, BI: tl.constexpr, BJ: tl.constexpr):
    b = tl.program_id(1)
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    i_ok = i < n_res
    base = b * n_res
    # explicit per-coordinate loads: Triton 3.6 compiles no list comprehensions (the interpreter does)
    tx = tl.load(true + (base + i) * 3 + 0, mask=i_ok, other=0.0)
    ty = tl.load(true + (base + i) * 3 + 1, mask=i_ok, other=0.0)
    tz = tl.load(true + (base + i) * 3 + 2, mask=i_ok, other=0.0)
    px = tl.load(pred + (base + i) * 3 + 0, mask=i_ok, other=0.0)
    py = tl.load(pred + (base + i) * 3 + 1, mask=i_ok, other=0.0)
    pz = tl.load(pred + (base + i) * 3 + 2, mask=i_ok, other=0.0)
    mi = tl.load(mask + base + i, mask=i_ok, other=0.0)
    num = tl.zeros([BI], dtype=tl.float32)
    den = tl.zeros([BI], dtype=tl.float32)
    for j0 in range(0, n_res, BJ):
        j = j0 + tl.arange(0, BJ)
        j_ok = j < n_res
        ex = tx[:, None] - tl.load(true + (base + j) * 3 + 0, mask=j_ok, other=0.0)[None, :]
        ey = ty[:, None] - tl.load(true + (base + j) * 3 + 1, mask=j_ok, other=0.0)[None, :]
        ez = tz[:, None] - tl.load(true + (base + j) * 3 + 2, mask=j_ok, other=0.0)[None, :]
        dt2 = ex * ex + ey * ey + ez * ez
        ex = px[:, None] - tl.load(pred + (base + j) * 3 + 0, mask=j_ok, other=0.0)[None, :]
        ey = py[:, None] - tl.load(pred + (base + j) * 3 + 1, mask=j_ok, other=0.0)[None, :]
        ez = pz[:, None] - tl.load(pred + (base + j) * 3 + 2, mask=j_ok, other=0.0)[None, :]
        dp2 = ex * ex + ey * ey + ez * ez
        d_t = tl.sqrt(dt2)
        err = tl.abs(d_t - tl.sqrt(dp2))
        mj = tl.load(mask + base + j, mask=j_ok, other=0.0)
        include = tl.where((d_t < 15.0) & (i[:, None] != j[None, :]), 1.0, 0.0) * mi[:, None] * mj[None, :]
        frac = 0.25 * ((err < 0.5).to(tl.float32) + (err < 1.0).to(tl.float32)
                       + (err < 2.0).to(tl.float32) + (err < 4.0).to(tl.float32))
        num += tl.sum(include * frac, axis=1)
        den += tl.sum(include, axis=1)
    # div_rn: torch divides with IEEE rounding; Triton's `/` on a GPU may differ by an ulp (a quarter
    # of the H200's per-residue scores did), and the metric asks for bit-equal scores
    tl.store(per_res + base + i, tl.math.div_rn(1e-10 + num, 1e-10 + den), mask=i_ok)
    tl.store(num_out + base + i, num, mask=i_ok)
    tl.store(den_out + base + i, den, mask=i_ok)


class ModelNew(nn.Module):
    def forward(self, pred, true, mask):
        batch, n_res, _ = pred.shape
        per_res = torch.empty(batch, n_res, device=pred.device, dtype=pred.dtype)
        num, den = torch.empty_like(per_res), torch.empty_like(per_res)
        bi, bj = (64, 64) if pred.is_cuda else (128, 256)
        _lddt_rows[(triton.cdiv(n_res, bi), batch)](pred.contiguous(), true.contiguous(), mask.contiguous(),
                                                    per_res, num, den, n_res, BI=bi, BJ=bj)
        return per_res, (1e-10 + num.sum(1)) / (1e-10 + den.sum(1))
