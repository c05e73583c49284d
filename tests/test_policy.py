"""The pure rules in fairq.policy: queue orders, fairness figures, back-off, tag arithmetic."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairq.errors import ConfigError
from fairq.policy.fairness import (
    MIN_CHARGE,
    check_max_running,
    check_weight,
    finish_after_dispatch,
    finish_after_run,
    is_eligible,
    run_charge,
    start_tag,
)
from fairq.policy.metrics import jain_index, percentile
from fairq.policy.queues import QueueOrder
from fairq.policy.retry import backoff

# -- queue orders --------------------------------------------------------------------------


def test_a_strict_tier_is_always_tried_first_and_every_queue_is_always_tried() -> None:
    order = QueueOrder.parse("critical, default:6, slow:1")
    assert order.queues == ["critical", "default", "slow"]
    for _ in range(20):
        tried = order.next()
        assert tried[0] == "critical"
        assert sorted(tried) == ["critical", "default", "slow"]


def test_a_weighted_group_is_drawn_in_its_ratio_over_every_window() -> None:
    order = QueueOrder.parse("default:6,slow:1")
    firsts = [order.next()[0] for _ in range(70)]
    for start in range(len(firsts) - 7 + 1):
        assert firsts[start : start + 7].count("slow") == 1


def test_an_unweighted_entry_splits_weighted_runs_into_separate_groups() -> None:
    order = QueueOrder.parse("a:1, b, c:2, d:1")
    assert [order.next()[:2] for _ in range(3)] == [["a", "b"]] * 3
    assert str(order) == "a:1,b,c:2,d:1"


def test_parsing_ignores_spaces_and_prints_back_canonically() -> None:
    assert str(QueueOrder.parse(" critical ,  default:6 , slow:1.5 ")) == (
        "critical,default:6,slow:1.5"
    )


def test_strict_order_is_the_given_order() -> None:
    assert QueueOrder.strict(["b", "a"]).next() == ["b", "a"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty queue name"),
        ("a,,b", "empty queue name"),
        ("a,", "empty queue name"),
        ("a,a", "appears twice"),
        ("a:2,b,a", "appears twice"),
        ("a:x", "not a number"),
        ("a:", "not a number"),
        ("a:0", "positive"),
        ("a:-1", "positive"),
        ("a:nan", "positive"),
        ("a:inf", "positive"),
        ("bad name", "invalid"),
        ("a/b", "invalid"),
        ("a:1:2", "not a number"),
    ],
)
def test_bad_queue_orders_are_refused_naming_the_problem(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        QueueOrder.parse(spec)


def test_a_worker_needs_a_queue() -> None:
    with pytest.raises(ConfigError, match="at least one queue"):
        QueueOrder.strict([])


# -- fairness figures ----------------------------------------------------------------------


def test_jain_index_is_1_for_equal_shares_and_1_over_n_when_one_takes_all() -> None:
    assert jain_index([5.0, 5.0, 5.0, 5.0]) == 1.0
    assert jain_index([10.0, 0.0, 0.0, 0.0]) == 0.25
    assert jain_index([1.0, 2.0, 3.0]) == pytest.approx(36 / 42)


def test_jain_index_of_nothing_is_perfectly_fair() -> None:
    assert jain_index([]) == 1.0
    assert jain_index([0.0, 0.0]) == 1.0


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=50))
def test_jain_index_lies_between_1_over_n_and_1(values: list[float]) -> None:
    index = jain_index(values)
    assert 1 / len(values) - 1e-9 <= index <= 1 + 1e-9


def test_percentile_is_nearest_rank() -> None:
    values = [7.0, 1.0, 10.0, 3.0, 2.0, 9.0, 4.0, 6.0, 5.0, 8.0]
    assert percentile(values, 50) == 5.0
    assert percentile(values, 90) == 9.0
    assert percentile(values, 99) == 10.0
    assert percentile(values, 100) == 10.0
    assert percentile(values, 0) == 1.0
    assert percentile([4.0], 50) == 4.0


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 50))


@given(st.lists(st.floats(-1e6, 1e6), min_size=1), st.floats(0, 100))
def test_percentile_is_one_of_the_values(values: list[float], q: float) -> None:
    assert percentile(values, q) in values


# -- retry back-off ------------------------------------------------------------------------


@given(st.integers(1, 40), st.floats(0.01, 100), st.floats(1, 10_000), st.randoms())
def test_backoff_is_in_the_upper_half_of_the_nominal_delay(
    attempt: int, base: float, cap: float, rng: random.Random
) -> None:
    nominal = min(cap, base * 2 ** (attempt - 1))
    assert nominal / 2 <= backoff(attempt, base=base, cap=cap, rng=rng) <= nominal


def test_backoff_doubles_per_attempt_up_to_the_cap() -> None:
    low = random.Random(0)
    low.random = lambda: 0.0  # type: ignore[method-assign]
    assert [backoff(n, rng=low) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert backoff(30, cap=600.0, rng=low) == 300.0


def test_backoff_never_exceeds_its_cap_even_after_very_many_attempts() -> None:
    assert 1800.0 <= backoff(5_000) <= 3600.0


# -- virtual-time tag arithmetic -----------------------------------------------------------


def test_an_idle_tenant_starts_at_the_queues_clock_not_behind_it() -> None:
    assert start_tag(finish=3.0, vclock=10.0) == 10.0
    assert start_tag(finish=12.0, vclock=10.0) == 12.0


def test_dispatch_charges_the_estimate_and_the_run_corrects_it_per_weight() -> None:
    finish = finish_after_dispatch(start=10.0, estimate=2.0, weight=4.0)
    assert finish == 10.5
    assert finish_after_run(finish, estimate=2.0, charge=6.0, weight=4.0) == 11.5


def test_a_run_is_charged_its_wall_time_and_at_least_the_minimum() -> None:
    assert run_charge(started_at=5.0, ended_at=7.5) == 2.5
    assert run_charge(started_at=5.0, ended_at=5.0) == MIN_CHARGE


def test_eligible_means_work_waiting_and_a_free_slot() -> None:
    assert is_eligible(ready=1, running=5, max_running=None)
    assert is_eligible(ready=1, running=1, max_running=2)
    assert not is_eligible(ready=1, running=2, max_running=2)
    assert not is_eligible(ready=0, running=0, max_running=None)


@pytest.mark.parametrize("weight", [0, -1, 0.0, math.nan, math.inf, True, "2", None])
def test_weights_must_be_positive_finite_numbers(weight: object) -> None:
    with pytest.raises(ConfigError, match="weight"):
        check_weight(weight)


@pytest.mark.parametrize("cap", [0, -1, 1.5, math.nan, True, "1"])
def test_caps_must_be_whole_numbers_of_at_least_1(cap: object) -> None:
    with pytest.raises(ConfigError, match="max_running"):
        check_max_running(cap)


def test_valid_weights_and_caps_pass_through() -> None:
    assert check_weight(3) == 3.0
    assert check_max_running(None) is None
    assert check_max_running(2) == 2
