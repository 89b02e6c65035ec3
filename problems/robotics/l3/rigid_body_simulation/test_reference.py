"""Cross-checks for robotics/l3/rigid_body_simulation: NumPy Newton-Euler simulation, energy balance."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
CALIBRATION_SHAPE = {"batch": 32, "n_joints": 5, "steps": 60}


def _rodrigues(axis, q):
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    s, c = np.sin(q)[:, None, None], np.cos(q)[:, None, None]
    return np.eye(3) + s * K + (1 - c) * (K @ K)


def _links(chain, q):
    """World-frame joint origins, axes and rotations of every link."""
    B, J = q.shape
    rot, pos = np.broadcast_to(np.eye(3), (B, 3, 3)), np.zeros((B, 3))
    out = []
    for i in range(J):
        pos = pos + rot @ chain["r_tree"][i]
        rot = rot @ chain["E_tree"][i].T @ _rodrigues(chain["axis"][i], q[:, i])
        out.append((pos, rot, rot @ chain["axis"][i]))
    return out


def _rnea_world(chain, q, qd, qdd, gravity):
    """Joint torques by Newton-Euler about each joint origin, every vector in the base frame."""
    B, J = q.shape
    links = _links(chain, q)
    w, dw, acc, prev = np.zeros((B, 3)), np.zeros((B, 3)), np.broadcast_to(-gravity, (B, 3)), np.zeros((B, 3))
    wrenches = []
    for i, (pos, rot, z) in enumerate(links):
        arm = pos - prev
        acc = acc + np.cross(dw, arm) + np.cross(w, np.cross(w, arm))
        w_new = w + z * qd[:, i:i + 1]
        dw = dw + z * qdd[:, i:i + 1] + np.cross(w_new, z * qd[:, i:i + 1])
        w, prev = w_new, pos
        com = rot @ chain["com"][i]
        acc_com = acc + np.cross(dw, com) + np.cross(w, np.cross(w, com))
        inertia = rot @ chain["I_com"][i] @ rot.transpose(0, 2, 1)
        force = chain["mass"][i] * acc_com
        moment = np.einsum("bij,bj->bi", inertia, dw) + np.cross(w, np.einsum("bij,bj->bi", inertia, w))
        wrenches.append((force, moment + np.cross(com, force)))
    tau = np.zeros((B, J))
    f_child, n_child = np.zeros((B, 3)), np.zeros((B, 3))
    for i in reversed(range(J)):
        pos, _, z = links[i]
        force, moment = wrenches[i]
        n = moment + n_child
        if i + 1 < J:
            n = n + np.cross(links[i + 1][0] - pos, f_child)
        f_child, n_child = force + f_child, n
        tau[:, i] = (z * n).sum(-1)
    return tau


def _forward_dynamics(chain, q, qd, tau):
    zero = np.zeros_like(q)
    h = _rnea_world(chain, q, qd, zero, chain["gravity"])
    M = np.empty(q.shape + q.shape[1:])
    for k in range(q.shape[1]):
        unit = zero.copy()
        unit[:, k] = 1.0
        M[:, :, k] = _rnea_world(chain, q, zero, unit, np.zeros(3))
    return np.linalg.solve(M, (tau - h)[..., None])[..., 0]


def _energy(chain, q, qd):
    """Kinetic + potential energy of every robot, from world-frame link velocities."""
    B, J = q.shape
    total, w, vel, prev = np.zeros(B), np.zeros((B, 3)), np.zeros((B, 3)), np.zeros((B, 3))
    for i, (pos, rot, z) in enumerate(_links(chain, q)):
        vel = vel + np.cross(w, pos - prev)            # joint origin velocity
        w, prev = w + z * qd[:, i:i + 1], pos
        com = rot @ chain["com"][i]
        v_com = vel + np.cross(w, com)
        inertia = rot @ chain["I_com"][i] @ rot.transpose(0, 2, 1)
        m = chain["mass"][i]
        total += 0.5 * m * (v_com ** 2).sum(-1) + 0.5 * (w * np.einsum("bij,bj->bi", inertia, w)).sum(-1)
        total -= m * ((pos + com) @ chain["gravity"])
    return total


def numpy_simulation(q0, qd0, phase, amp, omega, kp, kd, damping, limits, k_lim, steps, **chain):
    chain = {k: v.double().numpy() for k, v in chain.items()}
    q0, qd0, phase, amp, omega, kp, kd, damping, limits, k_lim = (
        t.double().numpy() for t in (q0, qd0, phase, amp, omega, kp, kd, damping, limits, k_lim))
    q, qd, frames = q0, qd0, []
    for n in range(steps):
        arg = omega * (n * 1e-3) + phase
        spring = np.maximum(limits[:, 0] - q, 0) - np.maximum(q - limits[:, 1], 0)
        tau = (kp * (amp * np.sin(arg) - q) + kd * (amp * omega * np.cos(arg) - qd) - damping * qd
               + k_lim * spring)
        qd = qd + 1e-3 * _forward_dynamics(chain, q, qd, tau)
        q = q + 1e-3 * qd
        if (n + 1) % 10 == 0:
            frames.append(q)
    return torch.from_numpy(np.stack(frames)), torch.from_numpy(qd)


def test_matches_numpy_newton_euler_simulation():
    case.check_against({"batch": 16, "n_joints": 4, "steps": 60}, numpy_simulation)


def test_limits_and_references_are_exercised():
    inputs, (frames, _) = case.run({"batch": 64, "n_joints": 4, "steps": 20})
    limits = inputs[8]
    outside = (frames < limits[:, 0]) | (frames > limits[:, 1])
    assert 0 < float(outside.float().mean()) < 0.5, "some, not most, states should press on a joint limit"


def _free_motion_energy_error(dt, steps, damping_value=0.0):
    """|E_end - E_start| of the unforced chain (no PD, no limit springs), float64 reference."""
    shape = {"batch": 4, "n_joints": 3, "steps": steps}
    inputs, _ = case.run({**shape, "steps": 10}, dtype=torch.float64)
    q0, qd0, phase, amp, omega, kp, kd, damping, limits, k_lim = inputs
    off = torch.zeros_like(kp)
    init = {k: (v.double() if torch.is_tensor(v) else v) for k, v in case.problem.init_inputs(shape).items()}
    module = case.problem.module
    saved, module.DT = module.DT, dt
    try:
        frames, qd = module.Model(**init)(q0, qd0, phase, amp, omega, off, off, torch.full_like(kp, damping_value),
                                          limits, torch.zeros_like(k_lim))
    finally:
        module.DT = saved
    chain = {k: v.numpy() for k, v in init.items() if torch.is_tensor(v)}
    e0 = _energy(chain, q0.numpy(), qd0.numpy())
    e1 = _energy(chain, frames[-1].numpy(), qd.numpy())
    assert float((frames[-1] - q0).abs().max()) > 0.05, "the chain must actually move"
    return e1 - e0


def test_energy_balance_without_control():
    """Semi-implicit Euler on the free chain: the energy error is first order in dt (it halves
    when dt halves), which fails for any inconsistent mass matrix, bias or gravity term."""
    coarse = _free_motion_energy_error(1e-3, 80)
    fine = _free_motion_energy_error(5e-4, 160)
    ratio = np.abs(fine) / np.abs(coarse)
    assert ((ratio > 0.4) & (ratio < 0.6)).all(), f"energy error ratio {ratio} is not first order"
    # viscous joint damping only removes energy
    damped = _free_motion_energy_error(1e-3, 80, damping_value=0.5)
    assert (damped < coarse).all()


def test_degeneracy():
    case.check_degeneracy({"batch": 32, "n_joints": 2, "steps": 20})


def test_tolerance_calibrated():
    max_abs, rel = case.drift(CALIBRATION_SHAPE)
    assert max_abs * 10 <= case.tolerance["atol"], f"fp32 drift {max_abs} leaves less than a 10x margin"
    case.check_calibration(CALIBRATION_SHAPE)
