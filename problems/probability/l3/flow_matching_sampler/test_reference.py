"""Cross-checks for probability/l3/flow_matching_sampler: NumPy float64 port, Heun order, guidance w = 1."""
import math

import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def numpy_sampler(x0, labels, n_steps, guidance, **w):
    w = {k: v.double().numpy() for k, v in w.items()}
    n_blocks = sum(1 for k in w if k.startswith("ada_w"))

    def silu(z):
        return z / (1 + np.exp(-z))

    def layer_norm(h):
        mu = h.mean(1, keepdims=True)
        return (h - mu) / np.sqrt(((h - mu) ** 2).mean(1, keepdims=True) + 1e-5)

    def lin(z, name_w, name_b):
        return z @ w[name_w].T + w[name_b]

    def velocity(x, t, lab):
        freqs = np.exp(-math.log(10000.0) * np.arange(128) / 128)
        ang = 1000.0 * t * freqs
        temb = np.broadcast_to(np.concatenate([np.sin(ang), np.cos(ang)]), (x.shape[0], 256))
        c = silu(lin(silu(lin(temb, "temb_w1", "temb_b1")), "temb_w2", "temb_b2") + w["class_table"][lab])
        h = lin(x, "in_w", "in_b")
        width = h.shape[1]
        for i in range(n_blocks):
            mod = lin(c, f"ada_w{i}", f"ada_b{i}")
            z = layer_norm(h) * (1 + mod[:, width:]) + mod[:, :width]
            h = h + lin(silu(lin(z, f"w1_{i}", f"b1_{i}")), f"w2_{i}", f"b2_{i}")
        mod = lin(c, "final_ada_w", "final_ada_b")
        return lin(layer_norm(h) * (1 + mod[:, width:]) + mod[:, :width], "out_w", "out_b")

    lab = labels.numpy()
    null = np.full_like(lab, w["class_table"].shape[0] - 1)

    def guided(x, t):
        return velocity(x, t, null) + guidance * (velocity(x, t, lab) - velocity(x, t, null))

    u = np.arange(n_steps + 1) / n_steps
    grid = 3 * u / (1 + 2 * u)
    x = x0.double().numpy()
    for k in range(n_steps):
        dt = grid[k + 1] - grid[k]
        d1 = guided(x, grid[k])
        x = x + dt * d1 if k == n_steps - 1 else x + dt / 2 * (d1 + guided(x + dt * d1, grid[k + 1]))
    return torch.from_numpy(x)


def test_matches_numpy_float64():
    case.check_against(case.small_shape(), numpy_sampler)


class _LinearField(ref.Model):
    def guided(self, x, t, labels, null_labels, guidance):
        return -x + t


def test_heun_is_second_order():
    init = case.problem.init_inputs(case.small_shape())
    x0 = torch.tensor([[0.7, -1.3]], dtype=torch.float64)
    errors = []
    for n in (16, 32, 64):
        grid = ref.time_grid(n, torch.float64, "cpu")
        # exact flow of dx/dt = -x + t from 0 to 1: x(1) = (x0 + 1) e^-1 (the grid covers [0, 1])
        x1 = _LinearField(**init)(x0, torch.zeros(1, dtype=torch.int64), n, 1.0)
        assert float(grid[-1]) == 1.0
        errors.append(float((x1 - (x0 + 1) * math.exp(-1.0)).abs().max()))
    # the last step is Euler (first order, one step): the total stays ~ O(h^2) + O(h^2) local
    for coarse, fine in zip(errors, errors[1:]):
        assert 3.0 < coarse / fine < 5.0, errors


def test_guidance_one_is_conditional_sampling():
    shape = dict(case.small_shape(), guidance=1.0)
    inputs, x1 = case.run(shape)
    model = ref.Model(**case.problem.init_inputs(shape))
    x0, labels, n_steps, _ = inputs
    grid = ref.time_grid(n_steps, x0.dtype, "cpu")
    x = x0
    with torch.no_grad():
        for k in range(n_steps):
            dt = grid[k + 1] - grid[k]
            d1 = model.velocity(x, grid[k:k + 1].expand(x.shape[0]), labels)
            if k == n_steps - 1:
                x = x + dt * d1
            else:
                x = x + 0.5 * dt * (d1 + model.velocity(x + dt * d1, grid[k + 1:k + 2].expand(x.shape[0]), labels))
    assert torch.allclose(x, x1, atol=1e-4)


def test_samples_move_and_depend_on_labels():
    inputs, x1 = case.run(case.small_shape())
    x0, labels, n_steps, guidance = inputs
    model = ref.Model(**case.problem.init_inputs(case.small_shape()))
    with torch.no_grad():
        other = model(x0, (labels + 1) % case.small_shape()["n_classes"], n_steps, guidance)
    assert float((x1 - x0).abs().mean()) > 0.1 and float((other - x1).abs().mean()) > 0.01


def test_degeneracy():
    case.check_degeneracy(case.small_shape(), init_perturbable=["in_w", "w1_0", "class_table", "out_w"])


def test_tolerance_calibrated():
    case.check_calibration(case.small_shape())
