"""Cross-checks for robotics/l3/mppi_controller: a plain Python float64 loop with an explicit softmin."""
import math

import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"envs": 2, "samples": 512, "horizon": 32, "obstacles": 16, "iters": 3}


def _step(s, steer, accel):
    x, y, th, v = s
    steer = min(max(steer, -0.5), 0.5)
    accel = min(max(accel, -3.0), 3.0)
    return (x + v * math.cos(th) * 0.05, y + v * math.sin(th) * 0.05,
            th + v * math.tan(steer) / 2.5 * 0.05, v + accel * 0.05)


def python_mppi(x0, goal, obs_c, obs_r, U0, eps, sigma, lam, w_g, w_c, w_v, v_ref):
    I, E, K, H, _ = eps.shape
    lam, w_g, w_c, w_v, v_ref = (float(t) for t in (lam, w_g, w_c, w_v, v_ref))
    sig = sigma.double().tolist()
    U_all, S_all, roll_all = [], [], []
    for e in range(E):
        U = U0[e].double().tolist()
        gx, gy = goal[e].tolist()
        obstacles = list(zip(obs_c[e].tolist(), obs_r[e].tolist()))
        for i in range(I):
            noise = eps[i, e].double().tolist()
            S = []
            for k in range(K):
                s, cost, ctrl = tuple(x0[e].tolist()), 0.0, 0.0
                for t in range(H):
                    n0, n1 = noise[k][t]
                    ctrl += U[t][0] * n0 / sig[0] ** 2 + U[t][1] * n1 / sig[1] ** 2
                    s = _step(s, U[t][0] + n0, U[t][1] + n1)
                    depth = sum(max(0.0, 1.0 - math.hypot(s[0] - cx, s[1] - cy) ** 2 / r ** 2) for (cx, cy), r in obstacles)
                    cost += w_g * ((s[0] - gx) ** 2 + (s[1] - gy) ** 2) + w_c * depth + w_v * (s[3] - v_ref) ** 2
                cost += 10 * w_g * ((s[0] - gx) ** 2 + (s[1] - gy) ** 2)
                S.append(cost + lam * ctrl)
            lo = min(S)
            log_z = math.log(sum(math.exp(-(x - lo) / lam) for x in S))
            weights = [math.exp(-(x - lo) / lam - log_z) for x in S]
            U = [[U[t][c] + sum(weights[k] * noise[k][t][c] for k in range(K)) for c in range(2)] for t in range(H)]
        s, roll = tuple(x0[e].tolist()), []
        for t in range(H):
            s = _step(s, U[t][0], U[t][1])
            roll.append(list(s))
        U_all.append(U)
        S_all.append(S)
        roll_all.append(roll)
    as_t = lambda x: torch.tensor(x, dtype=torch.float64)
    return as_t(U_all), as_t(S_all), as_t(roll_all)


def test_matches_python_loop():
    case.check_against({"envs": 2, "samples": 48, "horizon": 12, "obstacles": 5, "iters": 2}, python_mppi)


def test_controller_makes_progress_and_hits_obstacles():
    inputs, (U, S, rollout) = case.run({"envs": 3, "samples": 256, "horizon": 40, "obstacles": 16, "iters": 2})
    x0, goal = inputs[0], inputs[1]
    start = (x0[:, :2] - goal).norm(dim=-1)
    end = (rollout[:, -1, :2] - goal).norm(dim=-1)
    assert bool((end < start).all()), "the optimised rollout should approach the goal"
    spread = S.amax(1) - S.amin(1)
    assert bool((spread > 10).all()), "costs should differ across samples (collisions are counted)"


def test_obstacle_cost_is_continuous_at_the_boundary():
    """Issue 5: an obstacle indicator moved S_k by w_coll = 10 (a softmin weight by e^10) when a
    position lay within rounding of a boundary, and GPU and CPU disagreed on U by 4 %. The
    penetration depth is 1 at a centre, 0 outside, and changes by ~2e-6 across the boundary."""
    penetration = case.problem.module.penetration
    centre, radius = torch.tensor([[[3.0, -1.0]]], dtype=torch.float64), torch.tensor([[1.5]], dtype=torch.float64)
    for angle in (0.3, 2.0, 4.0):
        direction = torch.tensor([math.cos(angle), math.sin(angle)], dtype=torch.float64)
        points = torch.stack([centre[0, 0] + direction * 1.5 * (1 + side * 1e-6) for side in (-1, 1)])[None]
        inside, outside = penetration(points, centre, radius)[0].tolist()
        assert outside == 0.0 and 0.0 < inside < 1e-5
    assert float(penetration(centre, centre, radius)) == 1.0


def test_degeneracy():
    # every float input but w_vel (index 10): a 10% change of that small weight moves S by less
    # than its relative-norm tolerance; test_velocity_weight_matters checks it with a larger change
    shape = {"envs": 2, "samples": 256, "horizon": 32, "obstacles": 8, "iters": 2}
    case.check_degeneracy(shape, perturbable=[i for i in range(12) if i != 10])


def test_velocity_weight_matters():
    shape = {"envs": 2, "samples": 256, "horizon": 32, "obstacles": 8, "iters": 2}
    inputs, (U, S, _) = case.run(shape)
    changed = list(inputs)
    changed[10] = inputs[10] * 10
    U2, S2, _ = case.problem.module.Model()(*changed)
    assert float((S2 - S).norm() / S.norm()) > 10 * case.tolerance["per_output"][1]["rel_norm"]
    assert float((U2 - U).norm() / U.norm()) > case.tolerance["per_output"][0]["rel_norm"]


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert rel * 10 <= case.tolerance["per_output"][1]["rel_norm"], f"fp32 drift {rel} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
