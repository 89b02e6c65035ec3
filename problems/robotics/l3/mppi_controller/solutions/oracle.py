"""Oracle for robotics/l3/mppi_controller: three Triton kernels, no [E,K,H,4] trajectories.

Per iteration: (1) one lane per sample rolls the bicycle out over the whole horizon with the
state in registers, accumulating the path cost (obstacle penetration included) and the control
term on the fly, and writes only S [E,K]; (2) one program per environment computes the softmin
weights and the weighted noise sum and updates U in place. Finally (3) rolls out U.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

DT = 0.05
WHEELBASE = 2.5
STEER_MAX, ACCEL_MAX = 0.5, 3.0


@triton.jit
def _bicycle(x, y, th, v, steer, accel, DT_C: tl.constexpr, L_C: tl.constexpr):
    tan = tl.sin(steer) / tl.cos(steer)
    return x + v * tl.cos(th) * DT_C, y + v * tl.sin(th) * DT_C, th + v * tan / L_C * DT_C, v + accel * DT_C


@triton.jit
def _rollout_cost(x0, goal, obs_c, obs_r, U, eps, sigma, par, S_out, K, H, O,
                  DT_C: tl.constexpr, L_C: tl.constexpr, SMAX: tl.constexpr, AMAX: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    e = tl.program_id(0)
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    km = k < K
    zero = tl.zeros([BLOCK_K], tl.float32)
    x, y = zero + tl.load(x0 + e * 4), zero + tl.load(x0 + e * 4 + 1)
    th, v = zero + tl.load(x0 + e * 4 + 2), zero + tl.load(x0 + e * 4 + 3)
    gx, gy = tl.load(goal + e * 2), tl.load(goal + e * 2 + 1)
    s0, s1 = tl.load(sigma), tl.load(sigma + 1)
    lam, wg, wc, wv, vref = tl.load(par), tl.load(par + 1), tl.load(par + 2), tl.load(par + 3), tl.load(par + 4)
    cost = zero
    ctrl = zero
    noise = eps + (e * K + k) * (H * 2)
    for t in range(H):
        u0, u1 = tl.load(U + (e * H + t) * 2), tl.load(U + (e * H + t) * 2 + 1)
        n0 = tl.load(noise + t * 2, mask=km, other=0.0)
        n1 = tl.load(noise + t * 2 + 1, mask=km, other=0.0)
        ctrl += u0 * n0 / (s0 * s0) + u1 * n1 / (s1 * s1)
        steer = tl.minimum(tl.maximum(u0 + n0, -SMAX), SMAX)
        accel = tl.minimum(tl.maximum(u1 + n1, -AMAX), AMAX)
        x, y, th, v = _bicycle(x, y, th, v, steer, accel, DT_C, L_C)
        depth = zero
        for o in range(O):
            dx = x - tl.load(obs_c + (e * O + o) * 2)
            dy = y - tl.load(obs_c + (e * O + o) * 2 + 1)
            r = tl.load(obs_r + e * O + o)
            depth += tl.maximum(1.0 - (dx * dx + dy * dy) / (r * r), 0.0)
        cost += wg * ((x - gx) * (x - gx) + (y - gy) * (y - gy)) + wc * depth + wv * (v - vref) * (v - vref)
    cost += 10.0 * wg * ((x - gx) * (x - gx) + (y - gy) * (y - gy))
    tl.store(S_out + e * K + k, cost + lam * ctrl, mask=km)


@triton.jit
def _softmin_update(S, eps, U, par, K, HC, BLOCK_K: tl.constexpr, HCP: tl.constexpr):
    e = tl.program_id(0)
    lam = tl.load(par)
    lo = float("inf")
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        lo = tl.minimum(lo, tl.min(tl.load(S + e * K + k, mask=k < K, other=float("inf")), axis=0))
    c = tl.arange(0, HCP)
    total = 0.0
    acc = tl.zeros([HCP], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        km = k < K
        w = tl.where(km, tl.exp(-(tl.load(S + e * K + k, mask=km, other=0.0) - lo) / lam), 0.0)
        total += tl.sum(w, axis=0)
        tile = tl.load(eps + (e * K + k)[:, None] * HC + c[None, :], mask=km[:, None] & (c[None, :] < HC), other=0.0)
        acc += tl.sum(w[:, None] * tile, axis=0)
    u = tl.load(U + e * HC + c, mask=c < HC, other=0.0)
    tl.store(U + e * HC + c, u + acc / total, mask=c < HC)


@triton.jit
def _rollout(x0, U, out, E, H, DT_C: tl.constexpr, L_C: tl.constexpr, SMAX: tl.constexpr, AMAX: tl.constexpr,
             BLOCK_E: tl.constexpr):
    e = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    em = e < E
    x, y = tl.load(x0 + e * 4, mask=em, other=0.0), tl.load(x0 + e * 4 + 1, mask=em, other=0.0)
    th, v = tl.load(x0 + e * 4 + 2, mask=em, other=0.0), tl.load(x0 + e * 4 + 3, mask=em, other=0.0)
    for t in range(H):
        steer = tl.minimum(tl.maximum(tl.load(U + (e * H + t) * 2, mask=em, other=0.0), -SMAX), SMAX)
        accel = tl.minimum(tl.maximum(tl.load(U + (e * H + t) * 2 + 1, mask=em, other=0.0), -AMAX), AMAX)
        x, y, th, v = _bicycle(x, y, th, v, steer, accel, DT_C, L_C)
        o = out + (e * H + t) * 4
        tl.store(o, x, mask=em)
        tl.store(o + 1, y, mask=em)
        tl.store(o + 2, th, mask=em)
        tl.store(o + 3, v, mask=em)


class ModelNew(nn.Module):
    def forward(self, x0, goal, obs_centre, obs_radius, U0, eps, sigma, lam, w_goal, w_coll, w_vel, v_ref):
        I, E, K, H, _ = eps.shape
        O = obs_centre.shape[1]
        dev = x0.device
        f32 = lambda t: t.to(dev, torch.float32).contiguous()
        par = f32(torch.stack([lam, w_goal, w_coll, w_vel, v_ref]).reshape(5))
        x0, goal, obs_centre, obs_radius, eps, sigma = map(f32, (x0, goal, obs_centre, obs_radius, eps, sigma))
        U = U0.to(dev, torch.float32).clone().contiguous()
        S = torch.empty(E, K, device=dev, dtype=torch.float32)
        rollout = torch.empty(E, H, 4, device=dev, dtype=torch.float32)
        consts = dict(DT_C=DT, L_C=WHEELBASE, SMAX=STEER_MAX, AMAX=ACCEL_MAX)
        BLOCK_K = 128 if x0.is_cuda else 1024
        HCP = triton.next_power_of_2(2 * H)
        UPDATE_K = max(1, (4096 if x0.is_cuda else 65536) // HCP)
        for i in range(I):
            _rollout_cost[(E, triton.cdiv(K, BLOCK_K))](x0, goal, obs_centre, obs_radius, U, eps[i], sigma, par, S,
                                                        K, H, O, BLOCK_K=BLOCK_K, **consts)
            _softmin_update[(E,)](S, eps[i], U, par, K, 2 * H, BLOCK_K=UPDATE_K, HCP=HCP)
        _rollout[(triton.cdiv(E, 128),)](x0, U, rollout, E, H, BLOCK_E=128, **consts)
        return U, S, rollout
