"""Cross-checks for probability/l1/mcmc_ess_geyer: a line-by-line NumPy port of ArviZ's loop, AR(1) theory."""
import numpy as np
import torch

from orchestrator.testing import ProblemCase

case = ProblemCase.load(__file__)
ref = case.problem.module


def arviz_loop_ess(ary: np.ndarray) -> float:
    """ArviZ `_ess` (method 'identity') as written there: per-parameter Python loops, NumPy FFT."""
    n_chain, n_draw = ary.shape
    if np.max(ary) - np.min(ary) < np.finfo(float).resolution:
        return float(ary.size)
    centred = ary - ary.mean(axis=1, keepdims=True)
    size = 1 << (2 * n_draw - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    acov = np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :n_draw] / n_draw
    chain_mean = ary.mean(axis=1)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(chain_mean, ddof=1)
    rho_hat_t = np.zeros(n_draw)
    rho_hat_even = 1.0
    rho_hat_t[0] = rho_hat_even
    rho_hat_odd = 1 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho_hat_t[1] = rho_hat_odd
    t = 1
    while t < (n_draw - 3) and (rho_hat_even + rho_hat_odd) > 0.0:
        rho_hat_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_hat_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if (rho_hat_even + rho_hat_odd) >= 0:
            rho_hat_t[t + 1] = rho_hat_even
            rho_hat_t[t + 2] = rho_hat_odd
        t += 2
    max_t = t - 2
    if rho_hat_even > 0:
        rho_hat_t[max_t + 1] = rho_hat_even
    t = 1
    while t <= max_t - 2:
        if (rho_hat_t[t + 1] + rho_hat_t[t + 2]) > (rho_hat_t[t - 1] + rho_hat_t[t]):
            rho_hat_t[t + 1] = (rho_hat_t[t - 1] + rho_hat_t[t]) / 2.0
            rho_hat_t[t + 2] = rho_hat_t[t + 1]
        t += 2
    ess = n_chain * n_draw
    tau_hat = -1.0 + 2.0 * np.sum(rho_hat_t[: max_t + 1]) + np.sum(rho_hat_t[max_t + 1: max_t + 2])
    tau_hat = max(tau_hat, 1 / np.log10(ess))
    return ess / tau_hat


def loop_ess(draws):
    return torch.tensor([arviz_loop_ess(p) for p in draws.double().numpy()], dtype=torch.float64)


def test_matches_arviz_loop():
    case.check_against({"n_params": 300, "chains": 4, "draws": 200, "ar_coef": 0.9}, loop_ess)


def test_matches_arviz_loop_on_edge_cases():
    """One chain, odd and tiny draw counts, white noise, anti-correlated chains (early stop at the
    first pair), constant draws, near-unit-root chains that hit the lag limit."""
    gen = torch.Generator().manual_seed(7)
    cases = [torch.randn(50, 1, 101, generator=gen), torch.randn(50, 3, 7, generator=gen),
             torch.randn(20, 2, 6, generator=gen), torch.ones(2, 4, 100)]
    alternating = torch.randn(10, 2, 64, generator=gen) * 1e-3 + torch.tensor([1.0, -1.0]).repeat(32)  # S_0 <= 0
    walk = torch.randn(10, 2, 60, generator=gen).cumsum(2)
    for draws in cases + [alternating, walk]:
        got = ref.Model()(draws.double()).double()
        expected = loop_ess(draws)
        assert torch.allclose(got, expected, rtol=1e-9, atol=0), (draws.shape, got, expected)


def test_ar1_theory():
    """For AR(1) chains ESS / (C N) -> (1 - phi) / (1 + phi) as N grows."""
    gen = torch.Generator().manual_seed(11)
    phi, params, chains, n = 0.6, 64, 4, 4000
    x = torch.empty(params, chains, n, dtype=torch.float64)
    state = torch.randn(params, chains, generator=gen, dtype=torch.float64)
    for t in range(n):
        state = phi * state + (1 - phi * phi) ** 0.5 * torch.randn(params, chains, generator=gen, dtype=torch.float64)
        x[:, :, t] = state
    ratio = ref.Model()(x).mean() / (chains * n)
    assert abs(float(ratio) / ((1 - phi) / (1 + phi)) - 1) < 0.05


def test_checker_strict():
    inputs, ess = case.run(case.small_shape())
    tol = case.tolerance
    assert ref.check_output(inputs, ess * (1 + 5e-4), ess, tol)[0]
    assert not ref.check_output(inputs, ess * (1 + 2e-3), ess, tol)[0]
    many = ess.repeat(2048 // ess.numel())  # 2048 parameters: two truncation-lag outliers within 5 % are allowed
    two_off = many.clone()
    two_off[[3, 700]] *= 1.04
    assert ref.check_output(inputs, two_off, many, tol)[0]
    three_off = two_off.clone()
    three_off[1500] *= 1.04
    assert not ref.check_output(inputs, three_off, many, tol)[0]
    far = many.clone()
    far[3] *= 1.06
    assert not ref.check_output(inputs, far, many, tol)[0]
    assert not ref.check_output(inputs, ess[torch.randperm(ess.numel())], ess, tol)[0]


def test_degeneracy():
    case.check_degeneracy(case.small_shape())


def test_tolerance_calibrated():
    shape = {"n_params": 1000, "chains": 4, "draws": 1000, "ar_coef": 0.99}
    _, e32 = case.run(shape)
    _, e64 = case.run(shape, dtype=torch.float64)
    rel = ((e32.double() - e64).abs() / e64).max()
    assert rel < 1e-6  # float64 inside: only the output rounding and float32 input storage differ
    case.check_calibration(shape)
