"""The pure rules in fairq.policy: queue orders, fairness figures, back-off, tag arithmetic."""

from __future__ import annotations

import math
import random
from collections import deque

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fairq.errors import ConfigError
from fairq.policy.bounds import MAX_INT, MAX_WEIGHT, MIN_WEIGHT, check_max_running, check_weight
from fairq.policy.fairness import (
    MIN_CHARGE,
    charge_progress,
    finish_after_dispatch,
    finish_after_run,
    is_eligible,
    run_charge,
    start_tag,
)
from fairq.policy.history import DEFAULT_HALF_LIFE, add_usage, decayed, history_start
from fairq.policy.metrics import jain_index, max_min_shares, percentile
from fairq.policy.queues import QueueOrder
from fairq.policy.rate import (
    MAX_PERIOD,
    Rate,
    after_start,
    check_rate,
    limited_until,
    may_start,
    next_start,
)
from fairq.policy.retry import backoff
from fairq.policy.throttle import Throttle, check_rules, choose_queue, window_size, window_span

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
@example([1.0176602386718994e-159] * 2)  # squares that underflow to subnormals gave 1.0000012
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
    assert finish_after_run(finish, charged=2.0, charge=6.0, weight=4.0) == 11.5


def test_a_run_is_charged_its_wall_time_and_at_least_the_minimum() -> None:
    assert run_charge(started_at=5.0, ended_at=7.5) == 2.5
    assert run_charge(started_at=5.0, ended_at=5.0) == MIN_CHARGE


def test_eligible_means_work_waiting_a_free_slot_not_paused_and_not_rate_limited() -> None:
    assert is_eligible(ready=1, running=5, max_running=None, weight=1.0, limited=False)
    assert is_eligible(ready=1, running=1, max_running=2, weight=0.5, limited=False)
    assert not is_eligible(ready=1, running=2, max_running=2, weight=1.0, limited=False)
    assert not is_eligible(ready=0, running=0, max_running=None, weight=1.0, limited=False)
    assert not is_eligible(ready=1, running=0, max_running=None, weight=0.0, limited=False)
    assert not is_eligible(ready=1, running=0, max_running=None, weight=1.0, limited=True)


@pytest.mark.parametrize(
    "weight", [0, -1, 0.0, math.nan, math.inf, True, "2", None, MIN_WEIGHT / 2, MAX_WEIGHT * 2]
)
def test_weights_must_be_positive_finite_numbers(weight: object) -> None:
    with pytest.raises(ConfigError, match="weight"):
        check_weight(weight)


@pytest.mark.parametrize("cap", [0, -1, 1.5, math.nan, True, "1", MAX_INT + 1, 2**63], ids=str)
def test_caps_must_be_whole_numbers_of_at_least_1(cap: object) -> None:
    with pytest.raises(ConfigError, match="max_running"):
        check_max_running(cap)


@pytest.mark.parametrize("weight", [-1, -0.5, math.nan, math.inf, True, "0", None])
def test_a_pause_weight_is_0_or_more_and_still_a_finite_number(weight: object) -> None:
    with pytest.raises(ConfigError, match="0 \\(paused\\), or from"):
        check_weight(weight, paused_ok=True)


def test_valid_weights_and_caps_pass_through() -> None:
    assert check_weight(3) == 3.0
    assert check_weight(0, paused_ok=True) == 0.0
    assert check_max_running(None) is None
    assert check_max_running(2) == 2
    assert check_max_running(MAX_INT) == MAX_INT
    assert check_weight(MIN_WEIGHT) == MIN_WEIGHT
    assert check_weight(MAX_WEIGHT) == MAX_WEIGHT


# -- rate limits (GCRA) --------------------------------------------------------------------


def _overshoots(starts: list[float], window: float, bound: int) -> tuple[int, int]:
    """Sliding half-open windows ``(s - window, s]`` ending at each start: how many hold more
    than ``bound`` starts, and the most any holds (to show the bound is reached, not loose)."""
    inside: deque[float] = deque()
    over = most = 0
    for start in starts:
        inside.append(start)
        while inside[0] <= start - window:
            inside.popleft()
        most = max(most, len(inside))
        over += len(inside) > bound
    return over, most


def _gcra_starts(limit: Rate, rnd: random.Random, decisions: int) -> list[float]:
    """Ask the policy ``decisions`` times at random arrival times; a refused arrival sometimes
    retries exactly when the policy says it may (as maintenance re-admits a limited tenant).

    Gaps are multiples of 1/1024 s and intervals are dyadic, so every sum is exact in binary
    floating point and the window check needs no slack at all.
    """
    interval, tolerance = limit.interval, limit.tolerance
    tat: float | None = None
    now = 0.0
    starts: list[float] = []
    for _ in range(decisions):
        mean = interval * rnd.choice((0.05, 0.5, 1.0, 3.0))
        now += round(rnd.expovariate(1.0 / mean) * 1024) / 1024
        if not may_start(tat, now, interval, tolerance):
            until = limited_until(tat, now, interval, tolerance)
            assert until is not None and until > now
            if rnd.random() < 0.5:
                continue
            now = until
            assert may_start(tat, now, interval, tolerance)
        tat = after_start(tat, now, interval)
        starts.append(now)
    return starts


def test_gcra_has_zero_overshoots_over_a_million_decisions_with_random_arrivals() -> None:
    """scheduler.md: over any half-open window of length L at most
    ``burst - 1 + ceil(L / interval)`` jobs start. Proof sketch: tat grows by at least
    ``interval`` per start, so the n-th start of a window is at least ``(n - burst) * interval``
    after its first; fewer than L apart means n < burst + L / interval."""
    rnd = random.Random(20261121)
    limits = [Rate(4, 1.0), Rate(8, 1.0, burst=2), Rate(1, 2.0, burst=3), Rate(16, 4.0, burst=5)]
    total = 0
    for limit in limits:
        starts = _gcra_starts(limit, rnd, 250_000)
        total += 250_000
        for factor in (0.5, 1.0, 1.5, 3.0, 7.25, limit.count):
            window = limit.interval * factor
            bound = limit.burst - 1 + math.ceil(window / limit.interval)
            over, most = _overshoots(starts, window, bound)
            assert over == 0, (limit, window)
            assert most == bound, (limit, window)  # the bound is reached: it is the right one
    assert total == 1_000_000


def test_gcra_keeps_the_bound_at_real_world_rates_up_to_rounding() -> None:
    """100/minute has a 0.6 s interval, not exact in binary: sums of it round by ~1e-16 s, so
    windows are compared with a nanosecond of slack (far below any clock's resolution)."""
    rnd = random.Random(7)
    for limit in (Rate.parse("100/minute"), Rate.parse("10/30s", burst=4)):
        interval, tolerance = limit.interval, limit.tolerance
        tat: float | None = None
        now = 0.0
        starts: list[float] = []
        for _ in range(50_000):
            now += rnd.expovariate(1.0 / interval)
            if not may_start(tat, now, interval, tolerance):
                now = next_start(tat or now, interval, tolerance)
            tat = after_start(tat, now, interval)
            starts.append(now)
        for window in (interval, limit.period, 7.3 * interval):
            bound = limit.burst - 1 + math.ceil(window / interval)
            assert _overshoots(starts, window - 1e-9, bound)[0] == 0


def test_a_limited_tenant_may_start_again_exactly_at_limited_until() -> None:
    tat = after_start(None, 10.0, 2.0)
    assert tat == 12.0
    assert limited_until(tat, 10.0, 2.0, 0.0) == 12.0
    assert not may_start(tat, 11.999, 2.0, 0.0)
    assert may_start(tat, 12.0, 2.0, 0.0)
    assert limited_until(tat, 10.0, 2.0, 2.0) is None  # burst 2: the second may start at once
    assert limited_until(None, 10.0, 2.0, 0.0) is None
    assert after_start(12.0, 20.0, 2.0) == 22.0  # idle time is not banked beyond the burst


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100/minute", Rate(100, 60.0)),
        ("5/s", Rate(5, 1.0)),
        ("1000/hour", Rate(1000, 3600.0)),
        ("10/30s", Rate(10, 30.0)),
        ("3 / 2.5 min", Rate(3, 150.0)),
        ("1/day", Rate(1, 86400.0)),
        ("2/31d", Rate(2, 31 * 86400.0)),
        ("7/Seconds", Rate(7, 1.0)),
    ],
)
def test_rates_parse_count_per_period(text: str, expected: Rate) -> None:
    assert Rate.parse(text) == expected
    assert Rate.parse(text, burst=3) == Rate(expected.count, expected.period, 3)


def test_a_rates_interval_and_tolerance_follow_count_period_and_burst() -> None:
    limit = Rate(10, 5.0, burst=3)
    assert (limit.interval, limit.tolerance) == (0.5, 1.0)
    assert Rate(1, 2.0).tolerance == 0.0


@pytest.mark.parametrize(
    ("text", "burst", "message"),
    [
        ("", 1, "cannot read rate"),
        ("100", 1, "cannot read rate"),
        ("100/", 1, "cannot read rate"),
        ("/minute", 1, "cannot read rate"),
        ("100/fortnight", 1, "cannot read rate"),
        ("-1/minute", 1, "cannot read rate"),
        ("1.5/minute", 1, "cannot read rate"),
        ("ten/minute", 1, "cannot read rate"),
        ("0/minute", 1, "count"),
        ("1/0s", 1, "period"),
        ("1/0.0minute", 1, "period"),
        ("1/32d", 1, "period"),
        ("1/745h", 1, "period"),
        ("1/minute", 0, "burst"),
        ("1/minute", -2, "burst"),
    ],
)
def test_bad_rates_are_refused_naming_the_problem(text: str, burst: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Rate.parse(text, burst=burst)


@pytest.mark.parametrize(
    ("count", "period", "burst", "message"),
    [
        (0, 1.0, 1, "count"),
        (1.5, 1.0, 1, "count"),
        (True, 1.0, 1, "count"),
        (1, 0.0, 1, "period"),
        (1, -1.0, 1, "period"),
        (1, MAX_PERIOD + 1, 1, "period"),
        (1, math.nan, 1, "period"),
        (1, 1.0, 0, "burst"),
        (1, 1.0, 1.5, "burst"),
    ],
)
def test_bad_rate_objects_are_refused(count: int, period: float, burst: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Rate(count, period, burst)


def test_check_rate_accepts_a_rate_text_or_none_only() -> None:
    assert check_rate("5/s") == Rate(5, 1.0)
    assert check_rate(None) is None
    with pytest.raises(ConfigError, match="rate"):
        check_rate(5)


# -- throttle rules ------------------------------------------------------------------------

HOUR, DAY = 3600.0, 86400.0
WORKED = [Throttle(1, DAY, "slow"), Throttle(1, HOUR, "slower")]


@pytest.mark.parametrize(
    ("threshold", "per", "queue", "message"),
    [
        (0, 60.0, "slow", "threshold"),
        (-1, 60.0, "slow", "threshold"),
        (1.5, 60.0, "slow", "threshold"),
        (True, 60.0, "slow", "threshold"),
        (1, 0.0, "slow", "per"),
        (1, -5.0, "slow", "per"),
        (1, 31 * DAY + 1, "slow", "per"),
        (1, math.inf, "slow", "per"),
        (1, math.nan, "slow", "per"),
        (1, "60", "slow", "per"),
        (1, 60.0, "", "invalid"),
        (1, 60.0, "bad name", "invalid"),
        (1, 60.0, "a/b", "invalid"),
    ],
)
def test_bad_throttle_rules_are_refused_naming_the_problem(
    threshold: int, per: float, queue: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Throttle(threshold, per, queue)


def test_a_throttle_may_use_the_longest_supported_window() -> None:
    assert Throttle(1, 31 * DAY, "slow").per == MAX_PERIOD


def test_rules_routing_to_their_own_or_an_undeclared_queue_are_refused() -> None:
    assert check_rules(WORKED, "default", ["default", "slow", "slower"]) == WORKED
    with pytest.raises(ConfigError, match="own queue 'default'"):
        check_rules([Throttle(1, 60.0, "default")], "default", ["default"])
    with pytest.raises(ConfigError, match="undeclared queue 'slower'"):
        check_rules(WORKED, "default", ["default", "slow"])
    with pytest.raises(ConfigError, match=r"fairq\.Throttle"):
        check_rules([(1, 60.0, "slow")], "default", ["default", "slow"])  # type: ignore[list-item]


def test_the_worked_example_through_choose_queue() -> None:
    """The window as a store keeps it (span, newest threshold+1), then the last matching rule."""
    windows: dict[str, list[float]] = {}

    def route(tenant: str, now: float) -> str:
        span, size = window_span(WORKED), window_size(WORKED)
        times = [*(t for t in windows.get(tenant, []) if t >= now - span), now][-size:]
        windows[tenant] = times
        return choose_queue(times, now, WORKED, "default")

    assert (window_span(WORKED), window_size(WORKED)) == (DAY, 2)
    assert route("foo", 0.0) == "default"
    assert route("foo", 1.0) == "slower"
    assert route("bar", 2.0) == "default"
    assert route("foo", HOUR + 2) == "slow"
    assert route("foo", DAY + HOUR + 3) == "default"


def test_a_rule_matches_above_its_threshold_with_both_window_ends_inclusive() -> None:
    rule = [Throttle(2, 10.0, "slow")]
    assert choose_queue([0.0, 5.0], 10.0, rule, "home") == "home"  # 2 is not above 2
    assert choose_queue([0.0, 5.0, 10.0], 10.0, rule, "home") == "slow"  # t = now - per counts
    assert choose_queue([0.0, 5.0, 10.5], 10.5, rule, "home") == "home"  # 0.0 just left


def test_the_last_matching_rule_wins_even_if_an_earlier_one_is_stricter() -> None:
    rules = [Throttle(1, 60.0, "a"), Throttle(5, 60.0, "b"), Throttle(1, 10.0, "c")]
    assert choose_queue([0.0, 50.0], 50.0, rules, "home") == "a"
    assert choose_queue([0.0, 45.0, 50.0], 50.0, rules, "home") == "c"
    assert choose_queue([float(t) for t in range(45, 51)], 50.0, rules, "home") == "c"
    assert choose_queue([30.0, 31.0, 32.0, 33.0, 34.0, 50.0], 50.0, rules, "home") == "b"


# -- recent service with a half-life --------------------------------------------------------


def test_usage_halves_every_half_life_and_never_grows_backwards_in_time() -> None:
    assert decayed(8.0, 10.0, 10.0, 5.0) == 8.0
    assert decayed(8.0, 10.0, 15.0, 5.0) == 4.0
    assert decayed(8.0, 10.0, 25.0, 5.0) == 1.0
    assert decayed(8.0, 10.0, 3.0, 5.0) == 8.0  # an older `now` never inflates it


def test_usage_adds_after_decaying_and_is_never_negative() -> None:
    assert add_usage(8.0, 0.0, 5.0, 5.0, 1.5) == 5.5
    assert add_usage(1.0, 0.0, 0.0, 5.0, -3.0) == 0.0  # a refund cannot bank credit
    assert add_usage(0.0, 0.0, 100.0, 60.0, -0.001) == 0.0


@given(
    st.floats(0, 1e6),
    st.floats(0, 1e6),
    st.floats(0, 1e6),
    st.floats(0.001, 1e4),
    st.floats(-1e6, 1e6),
)
def test_usage_is_never_negative(
    usage: float, since: float, now: float, half_life: float, amount: float
) -> None:
    assert add_usage(usage, since, now, half_life, amount) >= 0.0
    assert 0.0 <= decayed(usage, since, now, half_life) <= usage


def test_a_returning_tenant_starts_behind_by_its_debt_capped_at_max_debt() -> None:
    assert history_start(finish=3.0, vclock=10.0, debt=0.0, max_debt=60.0) == 10.0
    assert history_start(finish=3.0, vclock=10.0, debt=25.0, max_debt=60.0) == 35.0
    assert history_start(finish=3.0, vclock=10.0, debt=500.0, max_debt=60.0) == 70.0
    assert history_start(finish=90.0, vclock=10.0, debt=500.0, max_debt=60.0) == 90.0
    assert DEFAULT_HALF_LIFE == 60.0


def test_heartbeats_charge_only_time_beyond_what_was_charged_and_not_while_paused() -> None:
    assert charge_progress(finish=10.0, charged=1.0, elapsed=5.0, weight=2.0) == (12.0, 5.0)
    assert charge_progress(finish=10.0, charged=5.0, elapsed=4.0, weight=2.0) == (10.0, 5.0)
    assert charge_progress(finish=10.0, charged=1.0, elapsed=5.0, weight=0.0) == (10.0, 1.0)
    assert finish_after_run(finish=12.0, charged=5.0, charge=6.0, weight=2.0) == 12.5
    assert finish_after_run(finish=12.0, charged=5.0, charge=6.0, weight=0.0) == 12.0


def test_max_min_shares_owe_a_small_claimant_all_it_asks_and_split_the_rest() -> None:
    shares = max_min_shares(10.0, {"big": 100.0, "small": 1.0, "mid": 4.0, "huge": 50.0})
    assert shares == pytest.approx({"small": 1.0, "mid": 3.0, "big": 3.0, "huge": 3.0})
    assert max_min_shares(3.0, {"a": 1.0, "b": 1.0}) == {"a": 1.0, "b": 1.0}
    assert max_min_shares(0.0, {}) == {}
