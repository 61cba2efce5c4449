"""The benchmarks' aggregate over seeds (bench/stats.py): the interquartile mean and its
bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from bench.stats import fraction_at_least, iqm, iqm_interval


def test_iqm_is_the_mean_of_the_middle_half_and_ignores_one_wild_seed() -> None:
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm([10, 500, 500, 500]) == pytest.approx(500.0)
    assert iqm([1, 2, 3, 4, 1000]) < 5  # the mean would be 202
    assert iqm([7.0]) == 7.0


def test_iqm_of_five_weighs_the_quartile_runs_in_part() -> None:
    # n = 5: the 2nd and 4th values lie across the quartiles, a quarter inside each
    assert iqm([0, 1, 2, 3, 100]) == pytest.approx((0.25 * 1 + 2 + 0.25 * 3) / 1.5)


def test_the_interval_holds_the_iqm_narrows_with_agreement_and_is_reproducible() -> None:
    spread = iqm_interval([100, 200, 300, 400, 500], resamples=2000)
    assert spread.low <= spread.value <= spread.high
    assert spread.high - spread.low > 100
    same = iqm_interval([500, 500, 500, 500, 500], resamples=2000)
    assert (same.low, same.value, same.high) == (500, 500, 500)
    assert iqm_interval([100, 200, 300, 400, 500], resamples=2000) == spread
    assert spread.text(0) == f"300 [{spread.low:.0f}, {spread.high:.0f}]"


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        iqm_interval([])
    with pytest.raises(ValueError, match="confidence"):
        iqm_interval([1.0], confidence=1.5)
    with pytest.raises(ValueError):
        iqm(np.array([]))


def test_fraction_at_least_counts_the_runs_that_reach_the_bound() -> None:
    assert fraction_at_least([475, 500, 474.9, float("nan")], 475) == "2 of 4"
