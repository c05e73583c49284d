"""The figures' pure rules (fairq/policy/histogram.py): buckets, merging, quantiles, the ETA."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairq.figures import FiguresParams, figures_from
from fairq.policy import histogram
from fairq.policy.histogram import (
    BOUNDS,
    BUCKETS,
    OVERFLOW,
    Share,
    bucket_of,
    counts_of,
    eta,
    histogram_of,
    merge,
    quantile,
)

durations = st.floats(min_value=-1.0, max_value=1e6, allow_nan=False)
counts = st.lists(st.integers(0, 1000), min_size=BUCKETS, max_size=BUCKETS).map(tuple)


def test_bounds_double_from_a_millisecond_to_about_a_day_and_a_half() -> None:
    assert BOUNDS[0] == 0.001 and all(b == 2 * a for a, b in pairwise(BOUNDS))
    assert 86_400 < BOUNDS[-1] < 2 * 86_400
    assert BUCKETS == len(BOUNDS) + 1 == OVERFLOW + 1


def test_a_bound_belongs_to_its_own_bucket_and_just_above_it_to_the_next() -> None:
    for i, bound in enumerate(BOUNDS):
        assert bucket_of(bound) == i
        assert bucket_of(math.nextafter(bound, math.inf)) == i + 1
    assert bucket_of(-5.0) == bucket_of(0.0) == 0
    assert bucket_of(1e9) == OVERFLOW


@given(durations)
def test_every_duration_is_at_most_its_buckets_bound_and_above_the_one_before(x: float) -> None:
    b = bucket_of(x)
    assert b == OVERFLOW or x <= BOUNDS[b]
    assert b == 0 or x > BOUNDS[b - 1]


@given(counts, counts, counts)
def test_merge_is_associative_and_commutative(
    a: tuple[int, ...], b: tuple[int, ...], c: tuple[int, ...]
) -> None:
    assert merge(a, b) == merge(b, a)
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


@given(st.lists(durations, max_size=50), st.lists(durations, max_size=50))
def test_merging_histograms_is_the_histogram_of_both(xs: list[float], ys: list[float]) -> None:
    assert merge(histogram_of(xs), histogram_of(ys)) == histogram_of(xs + ys)


@given(counts, st.floats(0.01, 1.0), st.floats(0.01, 1.0))
def test_quantiles_are_monotone_in_q(c: tuple[int, ...], p: float, q: float) -> None:
    lo, hi = sorted((p, q))
    a, b = quantile(c, lo), quantile(c, hi)
    assert (a is None) == (b is None) == (sum(c) == 0)
    assert a is None or b is None or a <= b


@given(
    st.lists(st.floats(0.0, 1e5, allow_nan=False), min_size=1, max_size=200), st.floats(0.01, 1.0)
)
def test_a_quantile_is_never_below_the_true_one_and_at_most_twice_it(
    xs: list[float], q: float
) -> None:
    true = sorted(xs)[max(1, math.ceil(q * len(xs))) - 1]
    found = quantile(histogram_of(xs), q)
    assert found is not None and true <= found
    assert found <= max(2 * true, BOUNDS[0])


def test_quantile_reports_the_buckets_upper_bound_and_overflow_as_infinite() -> None:
    c = counts_of({2: 98, 10: 1, OVERFLOW: 1})
    assert (quantile(c, 0.5), quantile(c, 0.99), quantile(c, 1.0)) == (0.004, 1.024, math.inf)
    with pytest.raises(ValueError, match="q must be in"):
        quantile(c, 0.0)


def test_the_eta_follows_the_share_and_the_limits_that_bind() -> None:
    # 10 starts/s in the queue, a tenant with 1/4 of the backlogged weight: a turn every 0.4 s
    assert eta(Share(weight=1.0, backlogged_weight=4.0), 10.0) == pytest.approx(0.4)
    # its rate limit (1 per 2 s) binds before its share
    assert eta(Share(weight=1.0, backlogged_weight=4.0, rate_per_second=0.5), 10.0) == 2.0
    # held by its rate limit for 3 s more first
    limited = Share(weight=1.0, backlogged_weight=1.0, rate_per_second=0.5, limited_for=3.0)
    assert eta(limited, 10.0) == 5.0
    # at its cap of 2 with 8 s runs: 1 start per 4 s
    capped = Share(weight=1.0, backlogged_weight=1.0, max_running=2, running=2, mean_run=8.0)
    assert eta(capped, 10.0) == 4.0
    # nothing to go by: no recent starts, or paused
    assert eta(Share(weight=1.0, backlogged_weight=1.0), 0.0) is None
    assert eta(Share(weight=0.0, backlogged_weight=1.0), 10.0) is None


def test_figures_keep_the_window_and_sum_per_tenant() -> None:
    now = 10 * histogram.SLOT + 5.0  # slot 10: the window is slots 1 .. 10
    rows = figures_from(
        [
            (("q", "a", 0, "w", 3), 7),  # slot 0 left the window
            (("q", "a", 1, "w", 3), 1),
            (("q", "a", 10, "w", 3), 2),
            (("q", "b", 4, "r", 3), 5),  # runs ended: 5, of them 2 failed
            (("q", "b", 5, "o", 1), 2),
            (("q", "b", 11, "w", 1), 9),  # not yet: after now
        ],
        FiguresParams(now=now),
    )
    assert [(r.tenant, r.started, r.outcomes, r.window) for r in rows] == [
        ("a", 3, {}, now - histogram.SLOT),
        ("b", 0, {"succeeded": 3, "failed": 2}, now - histogram.SLOT),
    ]
