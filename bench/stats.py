"""Aggregates for learning benchmarks over seeds: the interquartile mean and its
bootstrap confidence interval, as Agarwal et al. (2021, "Deep RL at the edge of the
statistical precipice") recommend for few runs: the IQM is robust to one outlying seed
where the mean is not, and more efficient than the median; the interval says how much
the figure would move with other seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean: the mean of the middle 50 % of the values, with the runs
    at the quartiles counted in part (so that it is defined for any number of runs; for
    n divisible by 4 it is the mean of the middle n/2 sorted values)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ValueError("the interquartile mean of no values is undefined")
    # Each sorted value covers [i/n, (i+1)/n) of the distribution; weigh it by how much
    # of that lies in [0.25, 0.75].
    edges = np.arange(n + 1) / n
    weight = np.clip(np.minimum(edges[1:], 0.75) - np.maximum(edges[:-1], 0.25), 0.0, None)
    return float((weight * x).sum() / weight.sum())


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval."""

    value: float
    low: float
    high: float

    def text(self, digits: int = 1) -> str:
        """``value [low, high]`` with ``digits`` decimals."""
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def iqm_interval(
    values: Sequence[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> Interval:
    """The IQM of ``values`` with a percentile bootstrap interval: the runs resampled
    with replacement ``resamples`` times, the IQM of each resample, and the middle
    ``confidence`` of those (a fixed ``seed``, so a report is made again exactly)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no values to aggregate")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, x.size, size=(resamples, x.size))
    stats = np.array([iqm(x[row]) for row in draws])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return Interval(iqm(x), float(low), float(high))


def fraction_at_least(values: Sequence[float], bound: float) -> str:
    """``k of n`` runs whose value reaches ``bound`` (what a reader checks a goal by)."""
    hits = sum(1 for v in values if not math.isnan(v) and v >= bound)
    return f"{hits} of {len(values)}"
