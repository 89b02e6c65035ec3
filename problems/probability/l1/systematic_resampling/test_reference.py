"""Cross-checks for probability/l1/systematic_resampling: a plain Python loop and the tie checker."""
import bisect
import math

import pytest
import torch

from orchestrator.testing import ProblemCase, to_device

case = ProblemCase.load(__file__)
ref = case.problem.module


def loop_resampling(log_w, u, particles):
    """Per system: float64 running sum of exp(log_w - max), bisect_right of every position."""
    batch, n, _ = particles.shape
    ancestors = torch.empty(batch, n, dtype=torch.int64)
    for b in range(batch):
        logs = log_w[b].double().tolist()
        top = max(logs)
        weights = [math.exp(x - top) for x in logs]
        total = math.fsum(weights)
        cdf, running = [], 0.0
        for w in weights:
            running += w / total
            cdf.append(running)
        cdf = [c / cdf[-1] for c in cdf]
        ub = float(u[b])
        ancestors[b] = torch.tensor([min(bisect.bisect_right(cdf, (ub + k) / n), n - 1) for k in range(n)])
    resampled = torch.stack([particles[b, ancestors[b]] for b in range(batch)])
    return ancestors, resampled


def test_matches_python_loop():
    case.check_against({"batch": 3, "n_particles": 3000, "dim": 2, "weight_skew": 3.0}, loop_resampling)


def test_matches_python_loop_at_cpu_default():
    case.check_against(case.small_shape(), loop_resampling, seed=5)


def test_counts_follow_weights():
    """Systematic resampling: particle i is copied floor(N W_i) or ceil(N W_i) times."""
    inputs, (ancestors, _) = case.run({"batch": 4, "n_particles": 2048, "dim": 1, "weight_skew": 1.5})
    weights = torch.softmax(inputs[0].double(), 1)
    for b in range(4):
        counts = torch.bincount(ancestors[b], minlength=2048).double()
        expected = 2048 * weights[b]
        assert bool(((counts - expected).abs() < 1.0 + 1e-9).all())


def test_checker_accepts_boundary_ties_only():
    """Uniform weights and u = 0 put every position k/N on a CDF boundary: the exact answers
    k - 1 and k are both correct; an ancestor two positions off is not."""
    n = 1000  # not a power of two: the float64 CDF rounds away from (i + 1)/N
    log_w = torch.zeros(2, n)
    u = torch.zeros(2)
    particles = torch.randn(2, n, 3, generator=torch.Generator().manual_seed(0))
    inputs = (log_w, u, particles)
    expected = ref.Model()(*inputs)
    exact_k = torch.arange(n).expand(2, n).contiguous()  # the first i with (i + 1)/N > k/N in exact arithmetic
    gathered = torch.gather(particles, 1, exact_k[:, :, None].expand(-1, -1, 3))
    lenient = {"fraction": 0.0}
    ok, msg = ref.check_output(inputs, (exact_k, gathered), expected, lenient)
    assert ok, msg
    assert not torch.equal(exact_k, expected[0])  # ties really occur, and the strict fraction refuses so many
    assert not ref.check_output(inputs, (exact_k, gathered), expected, case.tolerance)[0]
    two_off = exact_k.clone()
    two_off[0, 100] = 102
    gathered_two_off = torch.gather(particles, 1, two_off[:, :, None].expand(-1, -1, 3))
    assert not ref.check_output(inputs, (two_off, gathered_two_off), expected, lenient)[0]


def test_checker_on_real_inputs():
    inputs, (ancestors, resampled) = case.run(case.small_shape())
    tol = case.tolerance
    assert ref.check_output(inputs, (ancestors, resampled), (ancestors, resampled), tol)[0]
    shifted = ancestors.clone()
    shifted[0, 7] = (shifted[0, 7] + 1) % ancestors.shape[1]
    regathered = torch.gather(inputs[2], 1, shifted[:, :, None].expand(-1, -1, inputs[2].shape[2]))
    assert not ref.check_output(inputs, (shifted, regathered), (ancestors, resampled), tol)[0]
    wrong_particles = resampled.clone()
    wrong_particles[1, 3, 0] += 1.0
    assert not ref.check_output(inputs, (ancestors, wrong_particles), (ancestors, resampled), tol)[0]
    shuffled = ancestors[:, torch.randperm(ancestors.shape[1], generator=torch.Generator().manual_seed(1))]
    assert not ref.check_output(inputs, (shuffled, torch.gather(inputs[2], 1, shuffled[:, :, None].expand_as(resampled))),
                                (ancestors, resampled), tol)[0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_checker_judges_output_on_the_cpu_against_a_gpu_reference():
    """Issue 5: the harness hands check_output the candidate's output on the CPU, the inputs
    and the reference output on the GPU; the checker must judge it (not raise on devices)."""
    inputs, output = case.run(case.small_shape())
    inputs_gpu, expected_gpu = to_device(inputs, "cuda"), to_device(output, "cuda")
    ok, msg = ref.check_output(inputs_gpu, output, expected_gpu, case.tolerance)
    assert ok, msg
    shifted = output[0].clone()
    shifted[0, 7] = (shifted[0, 7] + 1) % shifted.shape[1]
    regathered = torch.gather(inputs[2], 1, shifted[:, :, None].expand(-1, -1, inputs[2].shape[2]))
    assert not ref.check_output(inputs_gpu, (shifted, regathered), expected_gpu, case.tolerance)[0]


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"batch": 16, "n_particles": 65536, "dim": 4, "weight_skew": 10.0}
    _, (a32, _) = case.run(shape)
    _, (a64, _) = case.run(shape, dtype=torch.float64)
    assert torch.equal(a32, a64)
    case.check_calibration(shape)


def host_bytes(s):
    """Inputs + outputs in bytes: the judge and candidate processes hold about 7x this on the host."""
    b, n, d = s["batch"], s["n_particles"], s["dim"]
    return 4 * (b * n + b + b * n * d) + 8 * b * n + 4 * b * n * d


def test_stress_shapes_fit_host_memory():
    shape = case.small_shape()
    inputs, outputs = case.run(shape)
    assert host_bytes(shape) == sum(t.numel() * t.element_size() for t in (*inputs, *outputs))
    assert max(host_bytes(s) for s in case.gpu_stress_shapes()) <= 2 * 2**30  # the 32 GiB sandbox holds ~7x (measured)
