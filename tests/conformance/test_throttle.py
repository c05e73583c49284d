"""Throttle rules: an enqueue records itself in its (job name, tenant) window, then the last
matching rule picks the queue. The window keeps only what can change a decision."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fairq.contract import Backend, EnqueueParams, FailParams, MaintainParams, ThrottleWindowsParams
from fairq.job import JobState, NewJob
from fairq.policy.throttle import Throttle

from .helpers import Q, job, new_job, stat, take

HOUR, DAY = 3600.0, 86400.0
WORKED = (Throttle(1, DAY, "slow"), Throttle(1, HOUR, "slower"))
Windows = dict[tuple[str, str], list[float]]


class Jobs:
    """Fresh job ids for one scenario."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, tenant: str, rules: Sequence[Throttle], name: str = "task") -> NewJob:
        self.n += 1
        return replace(new_job(self.n, tenant), name=name, throttle=tuple(rules))


def route(backend: Backend, jobs: Sequence[NewJob], now: float) -> list[str]:
    return backend.enqueue(EnqueueParams(jobs=jobs, now=now)).queues


def windows(backend: Backend, keys: list[tuple[str, str]], now: float) -> Windows:
    return backend.throttle_windows(ThrottleWindowsParams(keys=keys, now=now))


def test_the_worked_example_exactly(backend: Backend) -> None:
    jobs = Jobs()
    steps = [
        ("foo", 0.0, Q),
        ("foo", 1.0, "slower"),
        ("bar", 2.0, Q),
        ("foo", HOUR + 2, "slow"),
        ("foo", DAY + HOUR + 3, Q),
    ]
    for tenant, now, expected in steps:
        new = jobs(tenant, WORKED)
        assert route(backend, [new], now) == [expected], (tenant, now)
        assert job(backend, new.id).queue == expected
    keys = [("task", "foo"), ("task", "bar"), ("task", "nobody")]
    assert windows(backend, keys, DAY + HOUR + 3) == {
        ("task", "foo"): [DAY + HOUR + 3],  # HOUR + 2 is a second older than the span
        ("task", "bar"): [],  # 2.0 is older than the span (a day)
        ("task", "nobody"): [],
    }


def test_a_batch_is_routed_job_by_job_in_order(backend: Backend) -> None:
    jobs = Jobs()
    batch = [jobs("foo", WORKED), jobs("bar", WORKED), jobs("foo", WORKED), jobs("foo", WORKED)]
    assert route(backend, batch, 0.0) == [Q, Q, "slower", "slower"]


def test_a_rerouted_job_is_served_and_counted_in_its_new_queue(backend: Backend) -> None:
    jobs = Jobs()
    assert route(backend, [jobs("foo", WORKED), jobs("foo", WORKED)], 0.0) == [Q, "slower"]
    assert [lease.job_id for lease in take(backend, 0.0, limit=5)] == ["j1"]
    (lease,) = take(backend, 0.0, limit=5, queues=["slower"])
    assert (lease.job_id, lease.queue, lease.tenant) == ("j2", "slower", "foo")
    assert stat(backend, "foo", queue="slower").running == 1


def test_the_last_matching_rule_wins(backend: Backend) -> None:
    jobs = Jobs()
    rules = (Throttle(1, 100.0, "x"), Throttle(3, 100.0, "y"))
    routed = [route(backend, [jobs("foo", rules)], float(now))[0] for now in range(5)]
    assert routed == [Q, "x", "x", "y", "y"]
    # Listed out of order, the last match still wins: a looser rule after a stricter one.
    backwards = (Throttle(3, 100.0, "y"), Throttle(1, 100.0, "x"))
    routed = [route(backend, [jobs("bar", backwards)], float(now))[0] for now in range(5)]
    assert routed == [Q, "x", "x", "x", "x"]


def test_windows_count_per_job_name_and_tenant(backend: Backend) -> None:
    jobs = Jobs()
    rules = (Throttle(1, 60.0, "slow"),)
    assert route(backend, [jobs("foo", rules, "a"), jobs("foo", rules, "b")], 0.0) == [Q, Q]
    assert route(backend, [jobs("bar", rules, "a"), jobs("foo", rules, "a")], 1.0) == [Q, "slow"]


def test_the_window_is_bounded_by_the_largest_threshold_and_expires_with_the_span(
    backend: Backend,
) -> None:
    jobs = Jobs()
    rules = (Throttle(2, 50.0, "slow"), Throttle(3, 10.0, "slower"))  # window of 3 + 1 times
    routed = [route(backend, [jobs("foo", rules)], float(now))[0] for now in range(100)]
    assert routed[:3] == [Q, Q, "slow"]
    assert set(routed[3:]) == {"slower"}
    assert windows(backend, [("task", "foo")], 99.0) == {("task", "foo"): [96.0, 97.0, 98.0, 99.0]}
    # Times older than the span (50 s) are not counted, and not returned.
    assert windows(backend, [("task", "foo")], 147.0) == {("task", "foo"): [97.0, 98.0, 99.0]}
    assert windows(backend, [("task", "foo")], 150.0) == {("task", "foo"): []}
    assert route(backend, [jobs("foo", rules)], 150.0) == [Q]
    assert windows(backend, [("task", "foo")], 150.0) == {("task", "foo"): [150.0]}


def test_both_ends_of_a_rules_window_are_inclusive(backend: Backend) -> None:
    jobs = Jobs()
    rules = (Throttle(1, 10.0, "slow"),)
    assert route(backend, [jobs("foo", rules)], 0.0) == [Q]
    assert route(backend, [jobs("foo", rules)], 10.0) == ["slow"]  # 0.0 is exactly now - per
    assert route(backend, [jobs("bar", rules)], 0.0) == [Q]
    assert route(backend, [jobs("bar", rules)], 10.5) == [Q]


def test_jobs_without_rules_keep_their_queue_and_record_nothing(backend: Backend) -> None:
    jobs = Jobs()
    assert route(backend, [jobs("foo", ()), jobs("foo", ()), jobs("foo", WORKED)], 0.0) == [Q] * 3
    assert windows(backend, [("task", "foo")], 0.0) == {("task", "foo"): [0.0]}


def test_a_retry_is_not_counted_again_and_stays_where_it_was_routed(backend: Backend) -> None:
    jobs = Jobs()
    assert route(backend, [jobs("foo", WORKED), jobs("foo", WORKED)], 0.0) == [Q, "slower"]
    (lease,) = take(backend, 1.0, queues=["slower"])
    backend.fail(FailParams(token=lease.token, now=2.0, error="boom", retry_at=2.0))
    (again,) = take(backend, 3.0, queues=["slower"])
    backend.fail(FailParams(token=again.token, now=4.0, error="boom", retry_at=50.0))
    backend.maintain(MaintainParams(now=50.0))
    assert windows(backend, [("task", "foo")], 50.0) == {("task", "foo"): [0.0, 0.0]}
    info = job(backend, lease.job_id)
    assert (info.queue, info.state, info.attempts) == ("slower", JobState.READY, 2)
