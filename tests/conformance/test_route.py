"""``Backend.route``: the throttle decision of an enqueue for a job that goes to a peer's broker.
It counts the enqueue in the (job name, tenant) window that native enqueues use and stores no
job; the rules are those of test_throttle.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from fairq.contract import (
    Backend,
    EnqueueParams,
    GetJobsParams,
    RouteParams,
    StatsParams,
    ThrottleWindowsParams,
)
from fairq.errors import ConfigError, InvalidTenant
from fairq.policy.throttle import Throttle

from .helpers import Q, new_job

HOUR, DAY = 3600.0, 86400.0
WORKED = (Throttle(1, DAY, "slow"), Throttle(1, HOUR, "slower"))


def route(
    backend: Backend, tenant: str, now: float, rules: Sequence[Throttle], name: str = "task"
) -> str:
    params = RouteParams(name=name, tenant=tenant, queue=Q, rules=rules, now=now)
    return backend.route(params).queue


def window(backend: Backend, tenant: str, now: float, name: str = "task") -> list[float]:
    found = backend.throttle_windows(ThrottleWindowsParams(keys=[(name, tenant)], now=now))
    return found[(name, tenant)]


def test_the_worked_example_exactly(backend: Backend) -> None:
    steps = [
        ("foo", 0.0, Q),
        ("foo", 1.0, "slower"),
        ("bar", 2.0, Q),
        ("foo", HOUR + 2, "slow"),
        ("foo", DAY + HOUR + 3, Q),
    ]
    for tenant, now, expected in steps:
        assert route(backend, tenant, now, WORKED) == expected, (tenant, now)
    assert window(backend, "foo", DAY + HOUR + 3) == [DAY + HOUR + 3]


def test_no_job_is_stored(backend: Backend) -> None:
    route(backend, "foo", 0.0, WORKED)
    route(backend, "foo", 1.0, WORKED)
    assert backend.stats(StatsParams()) == []


def test_a_rule_matches_only_above_its_threshold(backend: Backend) -> None:
    rules = (Throttle(3, 100.0, "slow"),)
    routed = [route(backend, "foo", float(now), rules) for now in range(5)]
    assert routed == [Q, Q, Q, "slow", "slow"]  # the 4th enqueue is the first above 3


def test_the_last_matching_rule_wins(backend: Backend) -> None:
    rules = (Throttle(1, 100.0, "x"), Throttle(3, 100.0, "y"))
    assert [route(backend, "foo", float(n), rules) for n in range(5)] == [Q, "x", "x", "y", "y"]
    backwards = (Throttle(3, 100.0, "y"), Throttle(1, 100.0, "x"))
    assert [route(backend, "bar", float(n), backwards) for n in range(5)] == [Q] + ["x"] * 4


def test_the_window_slides(backend: Backend) -> None:
    rules = (Throttle(1, 10.0, "slow"),)
    assert route(backend, "foo", 0.0, rules) == Q
    assert route(backend, "foo", 10.0, rules) == "slow"  # 0.0 is exactly now - per: counted
    assert route(backend, "foo", 20.5, rules) == Q  # 10.0 has slid out
    assert route(backend, "foo", 21.0, rules) == "slow"
    assert window(backend, "foo", 21.0) == [20.5, 21.0]


def test_windows_count_per_job_name_and_tenant(backend: Backend) -> None:
    rules = (Throttle(1, 60.0, "slow"),)
    assert route(backend, "foo", 0.0, rules, name="a") == Q
    assert route(backend, "bar", 0.0, rules, name="a") == Q
    assert route(backend, "foo", 1.0, rules, name="b") == Q
    assert route(backend, "foo", 2.0, rules, name="a") == "slow"


def test_no_rules_route_home_and_count_nothing(backend: Backend) -> None:
    assert route(backend, "foo", 0.0, ()) == Q
    assert window(backend, "foo", 0.0) == []


def test_route_and_a_native_enqueue_share_the_count(backend: Backend) -> None:
    throttled = replace(new_job(1, "foo"), throttle=WORKED)
    assert backend.enqueue(EnqueueParams(jobs=[throttled], now=0.0)).queues == [Q]
    assert route(backend, "foo", 1.0, WORKED) == "slower"  # the second of the window
    second = replace(new_job(2, "foo"), throttle=WORKED)
    assert backend.enqueue(EnqueueParams(jobs=[second], now=2.0)).queues == ["slower"]
    assert window(backend, "foo", 2.0) == [1.0, 2.0]  # window size: max threshold + 1
    (job,) = backend.get_jobs(GetJobsParams(ids=["j2"]))
    assert job.queue == "slower"
    # And the other way round: routed first, then enqueued natively.
    assert route(backend, "bar", 0.0, WORKED) == Q
    third = replace(new_job(3, "bar"), throttle=WORKED)
    assert backend.enqueue(EnqueueParams(jobs=[third], now=1.0)).queues == ["slower"]


@pytest.mark.parametrize(
    ("change", "error", "named"),
    [
        ({"tenant": ""}, InvalidTenant, "tenant"),
        ({"tenant": 3.5}, InvalidTenant, "tenant"),
        ({"queue": "a b"}, ConfigError, "queue"),
        ({"name": ""}, ConfigError, "name"),
        ({"rules": Throttle(1, 1.0, "slow")}, ConfigError, "rules"),
        ({"rules": ["slow"]}, ConfigError, "rules"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(
    change: dict[str, object], error: type[Exception], named: str
) -> None:
    args: dict[str, object] = {"name": "task", "tenant": "a", "queue": Q, "rules": (), "now": 0.0}
    with pytest.raises(error, match=named):
        RouteParams(**{**args, **change})  # type: ignore[arg-type]
