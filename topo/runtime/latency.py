"""Latency histograms of the call figures (``topo.runtime.callstats``): counts in fixed
buckets growing by a quarter each, 20 us to about 150 s, so a percentile (p50, p99 in
``topo top``) is known within a bucket's width (25 %) at the cost of one bisect per call.
Percentiles are read as Prometheus' ``histogram_quantile`` reads them: linearly within
the bucket the rank falls in."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

GROWTH = 1.25
EDGES = tuple(20e-6 * GROWTH**i for i in range(72))  # upper bounds, in seconds
SIZE = len(EDGES) + 1  # the last bucket holds what took longer than the last edge


def empty() -> list[int]:
    """A histogram with no calls."""
    return [0] * SIZE


def bucket(seconds: float) -> int:
    """The bucket a call of ``seconds`` counts in."""
    return bisect_left(EDGES, seconds)


def merged(histograms: Iterable[list[int]]) -> list[int]:
    """The sum of ``histograms``."""
    total = empty()
    for histogram in histograms:
        for i, count in enumerate(histogram):
            if count:
                total[i] += count
    return total


def quantile(histogram: list[int], q: float, worst: float | None = None) -> float | None:
    """The ``q`` quantile (0..1) of the calls counted in ``histogram``, in seconds, never
    above ``worst`` (the slowest call seen, where known); None when it counts none."""
    calls = sum(histogram)
    if not calls:
        return None
    rank = q * calls
    seen = 0
    for i, count in enumerate(histogram):
        if count and seen + count >= rank:
            low = EDGES[i - 1] if i > 0 else 0.0
            high = EDGES[i] if i < len(EDGES) else (worst or EDGES[-1])
            value = low + (high - low) * max(0.0, rank - seen) / count
            return min(value, worst) if worst else value
        seen += count
    return worst
