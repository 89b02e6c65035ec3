"""The report's statistics against SciPy's independent implementations."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from orchestrator.report.stats import geomean_ci, median_ci, pareto_front, quantiles, spearman


def test_bootstrap_intervals_agree_with_scipy():
    values = np.random.default_rng(7).lognormal(mean=0.2, sigma=0.5, size=150)
    ours_median, ours_geomean = median_ci(values), geomean_ci(values)
    theirs_median = scipy_stats.bootstrap((values,), np.median, method="percentile", n_resamples=4000,
                                          rng=np.random.default_rng(1)).confidence_interval
    theirs_geomean = scipy_stats.bootstrap((values,), scipy_stats.gmean, method="percentile", n_resamples=4000,
                                           rng=np.random.default_rng(1)).confidence_interval
    assert ours_median.value == pytest.approx(float(np.median(values)))
    assert ours_geomean.value == pytest.approx(float(scipy_stats.gmean(values)))
    # two independent Monte Carlo estimates of the same interval: equal within a few per cent
    assert ours_median.low == pytest.approx(theirs_median.low, rel=0.04)
    assert ours_median.high == pytest.approx(theirs_median.high, rel=0.04)
    assert ours_geomean.low == pytest.approx(theirs_geomean.low, rel=0.03)
    assert ours_geomean.high == pytest.approx(theirs_geomean.high, rel=0.03)


def test_bootstrap_is_reproducible_and_degenerate_cases_have_no_interval():
    values = [0.9, 1.1, 1.3, 2.0, 0.7]
    assert median_ci(values) == median_ci(values)
    assert median_ci([]).value is None
    single = geomean_ci([1.7])
    assert single.value == pytest.approx(1.7) and single.low is None and single.n == 1
    constant = median_ci([2.0] * 5)
    assert constant.low == constant.high == 2.0


def test_spearman_agrees_with_scipy_including_ties():
    rng = np.random.default_rng(3)
    tokens = rng.integers(1000, 5000, size=40).astype(float)
    tokens[:6] = 2000.0                                        # ties
    speed = np.round(tokens / 1000 + rng.normal(0, 1.5, size=40), 1)
    expected = scipy_stats.spearmanr(tokens, speed).statistic
    assert spearman(tokens, speed).value == pytest.approx(expected, abs=1e-12)
    assert spearman([1, 2], [3, 4]).value is None              # too few points
    assert spearman([1, 2, 3], [5, 5, 5]).value is None        # no variation


def test_pareto_front_keeps_only_undominated_points():
    points = [(100, 1.0), (200, 0.8), (300, 2.0), (300, 1.5), (400, 2.0), (500, 3.0), (50, 0.5)]
    assert pareto_front(points) == [(50, 0.5), (100, 1.0), (300, 2.0), (500, 3.0)]
    assert pareto_front([]) == []


def test_quantiles():
    q = quantiles([4.0, 1.0, 3.0, 2.0, 5.0])
    assert q == {"min": 1.0, "p25": 2.0, "median": 3.0, "p75": 4.0, "max": 5.0}
    assert quantiles([])["median"] is None
    assert math.isclose(quantiles([1.0, 2.0])["median"], 1.5)
