"""Small statistics for the report: ratios, bootstrap intervals, rank correlation, Pareto front.

Bootstrap resampling uses a fixed seed so that a report is reproducible byte for byte.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101


@dataclass(frozen=True)
class Ratio:
    num: int
    den: int

    @property
    def value(self) -> float | None:
        return self.num / self.den if self.den else None


@dataclass(frozen=True)
class Estimate:
    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0


def geometric_mean(values: Sequence[float]) -> float:
    return float(math.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def _median(samples: np.ndarray) -> np.ndarray:
    return np.asarray(np.median(samples, axis=-1))


def _geomean(samples: np.ndarray) -> np.ndarray:
    return np.asarray(np.exp(np.mean(np.log(samples), axis=-1)))


def bootstrap(values: Sequence[float], statistic: Callable[[np.ndarray], np.ndarray],
              confidence: float = 0.95) -> Estimate:
    """Point estimate and percentile-bootstrap interval; no interval below two values."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate(None)
    point = float(statistic(data))
    if data.size < 2:
        return Estimate(point, n=1)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    resamples = data[rng.integers(0, data.size, size=(BOOTSTRAP_RESAMPLES, data.size))]
    stats = statistic(resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return Estimate(point, float(low), float(high), int(data.size))


def median_ci(values: Sequence[float]) -> Estimate:
    return bootstrap(values, _median)


def geomean_ci(values: Sequence[float]) -> Estimate:
    return bootstrap(values, _geomean)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=float)
    sorted_values = values[order]
    start = 0
    while start < values.size:             # tied values share the mean of their ranks
        end = start
        while end + 1 < values.size and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> Estimate:
    """Spearman's rank correlation (Pearson on average ranks); None if undefined."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 3:
        return Estimate(None, n=int(a.size))
    ra, rb = _average_ranks(a), _average_ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return Estimate(None, n=int(a.size))
    return Estimate(float(np.corrcoef(ra, rb)[0, 1]), n=int(a.size))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points (cost, gain) that no other point beats on both: lower cost and higher gain."""
    front: list[tuple[float, float]] = []
    best_gain = -math.inf
    for cost, gain in sorted(points, key=lambda p: (p[0], -p[1])):
        if gain > best_gain:
            front.append((cost, gain))
            best_gain = gain
    return front


def quantiles(values: Sequence[float]) -> dict[str, float | None]:
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return {"min": None, "p25": None, "median": None, "p75": None, "max": None}
    q = np.percentile(data, [0, 25, 50, 75, 100])
    return dict(zip(("min", "p25", "median", "p75", "max"), (float(v) for v in q)))
