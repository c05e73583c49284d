"""Leases: at-least-once delivery. Expiry puts a job back and frees its slot; a stale or unknown
lease is refused and changes nothing; heartbeats extend; release hands back without an attempt."""

from __future__ import annotations

import pytest

from fairq.contract import (
    Backend,
    FailParams,
    HeartbeatParams,
    MaintainParams,
    ReleaseParams,
)
from fairq.errors import LeaseExpired, LeaseNotFound
from fairq.job import JobState

from .helpers import (
    ack,
    ack_lost,
    enqueue,
    job,
    new_job,
    new_jobs,
    set_tenant,
    snapshot,
    stat,
    take,
    take_one,
)


def test_a_lease_carries_the_job_and_a_token_naming_its_attempt(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0, cost=2.5, max_attempts=4)], now=1.0)
    lease = take_one(backend, 2.0)
    assert (lease.token, lease.job_id, lease.name, lease.queue, lease.tenant) == (
        "j0:1",
        "j0",
        "task",
        "default",
        "a",
    )
    assert lease.payload == '{"args":[0],"kwargs":{}}'
    assert (lease.attempt, lease.max_attempts, lease.lease_timeout, lease.cost) == (1, 4, 10.0, 2.5)
    assert (lease.started_at, lease.deadline) == (2.0, 12.0)
    info = job(backend, "j0")
    assert (info.state, info.attempts, info.started_at, info.deadline) == (
        JobState.RUNNING,
        1,
        2.0,
        12.0,
    )


def test_an_expired_lease_puts_the_job_back_and_frees_the_slot(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2), lease=10.0))
    set_tenant(backend, "a", max_running=1)
    take_one(backend, 0.0)
    assert take(backend, 9.0) == []  # at the cap until the lease expires
    result = backend.maintain(MaintainParams(now=10.0))
    assert [
        (e.job_id, e.name, e.queue, e.tenant, e.attempt, e.deadline, e.dead) for e in result.expired
    ] == [("j0", "task", "default", "a", 1, 10.0, False)]
    info = job(backend, "j0")
    assert (info.state, info.attempts, info.last_error) == (JobState.READY, 1, "lease expired")
    row = stat(backend, "a")
    assert (row.ready, row.running, row.failed) == (2, 0, 1)
    assert take_one(backend, 10.0).token == "j0:2"  # same place in its FIFO, next attempt


def test_dequeue_expires_overdue_leases_first(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0)])
    take_one(backend, 0.0)
    again = take_one(backend, 10.0)
    assert (again.job_id, again.attempt, again.deadline) == ("j0", 2, 20.0)


@pytest.mark.parametrize("end", ["fail", "release"])
def test_ending_an_expired_lease_raises_lease_expired_and_changes_nothing(
    backend: Backend, end: str
) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0), new_job(1, "a")])
    lease = take_one(backend, 0.0)
    before = snapshot(backend, ["j0", "j1"])
    with pytest.raises(LeaseExpired):
        _end(backend, end, lease.token, now=10.0)
    assert snapshot(backend, ["j0", "j1"]) == before


@pytest.mark.parametrize("end", ["fail", "release"])
def test_ending_an_unknown_lease_raises_lease_not_found_and_changes_nothing(
    backend: Backend, end: str
) -> None:
    enqueue(backend, [new_job(0, "a"), new_job(1, "a")])
    lease = take_one(backend, 0.0)
    before = snapshot(backend, ["j0", "j1"])
    for token in ["nope:1", "j1:1", "j0:2", "j0", ""]:
        with pytest.raises(LeaseNotFound):
            _end(backend, end, token, now=1.0)
    assert snapshot(backend, ["j0", "j1"]) == before
    ack(backend, lease, 1.0)
    with pytest.raises(LeaseNotFound):  # already acked
        _end(backend, end, lease.token, now=1.0)


def test_a_stale_lease_never_matches_the_jobs_next_attempt(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0)])
    stale = take_one(backend, 0.0)
    fresh = take_one(backend, 10.0)
    assert ack_lost(backend, stale.token, 11.0)
    ack(backend, fresh, 11.0)
    assert job(backend, "j0").state is JobState.SUCCEEDED


def test_heartbeat_extends_the_deadline(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0)])
    lease = take_one(backend, 0.0)
    result = backend.heartbeat(HeartbeatParams(tokens=[lease.token], now=8.0))
    assert dict(result.deadlines) == {lease.token: 18.0}
    assert list(result.lost) == []
    assert job(backend, "j0").deadline == 18.0
    assert backend.maintain(MaintainParams(now=15.0)).expired == []
    ack(backend, lease, 17.0)
    assert job(backend, "j0").state is JobState.SUCCEEDED


def test_heartbeat_reports_expired_and_unknown_tokens_as_lost_and_changes_them_not(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0), new_job(1, "b", lease=30.0)])
    short, long = take(backend, 0.0, limit=2)
    expired_before = job(backend, "j0")
    result = backend.heartbeat(
        HeartbeatParams(tokens=[short.token, "nope:1", long.token], now=10.0)
    )
    assert dict(result.deadlines) == {long.token: 40.0}
    assert sorted(result.lost) == sorted([short.token, "nope:1"])
    assert job(backend, "j0") == expired_before


def test_release_hands_the_job_back_without_counting_the_attempt(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=1), new_job(1, "a")])
    lease = take_one(backend, 0.0)
    backend.release(ReleaseParams(token=lease.token, now=1.0))
    info = job(backend, "j0")
    assert (info.state, info.attempts) == (JobState.READY, 0)
    row = stat(backend, "a")
    assert (row.ready, row.running, row.failed, row.succeeded) == (2, 0, 0, 0)
    again = take_one(backend, 1.0)
    assert (again.job_id, again.attempt) == ("j0", 1)  # keeps its place; still one attempt left
    ack(backend, again, 2.0)
    assert job(backend, "j0").state is JobState.SUCCEEDED


def test_a_released_jobs_next_lease_has_a_new_token_and_the_old_one_is_refused(
    backend: Backend,
) -> None:
    """Tokens count leases, not attempts: release gives the attempt back but never the token."""
    enqueue(backend, [new_job(0, "a")])
    first = take_one(backend, 0.0)
    backend.release(ReleaseParams(token=first.token, now=1.0))
    second = take_one(backend, 2.0)
    assert (first.token, second.token) == ("j0:1", "j0:2")
    assert (first.attempt, second.attempt) == (1, 1)
    before = snapshot(backend, ["j0"])
    assert ack_lost(backend, first.token, 3.0)
    for how in ("fail", "release"):
        with pytest.raises(LeaseNotFound):
            _end(backend, how, first.token, now=3.0)
    lost = backend.heartbeat(HeartbeatParams(tokens=[first.token], now=3.0)).lost
    assert list(lost) == [first.token]
    assert snapshot(backend, ["j0"]) == before
    ack(backend, second, 3.0)
    assert job(backend, "j0").state is JobState.SUCCEEDED


def test_release_frees_the_slot(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    set_tenant(backend, "a", max_running=1)
    lease = take_one(backend, 0.0)
    assert take(backend, 0.0) == []
    backend.release(ReleaseParams(token=lease.token, now=0.5))
    assert take_one(backend, 0.5).job_id == "j0"


def _end(backend: Backend, how: str, token: str, now: float) -> None:
    if how == "fail":
        backend.fail(FailParams(token=token, now=now, error="boom", retry_at=now))
    else:
        backend.release(ReleaseParams(token=token, now=now))


def test_maintain_reports_the_next_lease_deadline_as_due(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0), new_job(1, "a", run_at=50.0)])
    take_one(backend, 0.0)
    assert backend.maintain(MaintainParams(now=1.0)).next_due == 10.0
    backend.heartbeat(HeartbeatParams(tokens=["j0:1"], now=5.0))
    assert backend.maintain(MaintainParams(now=6.0)).next_due == 15.0


def test_release_with_a_later_run_at_schedules_the_job_without_counting_the_attempt(
    backend: Backend,
) -> None:
    """A worker that cannot run a job hands it back for later, saying why."""
    enqueue(backend, [new_job(0, "a"), new_job(1, "a")])
    set_tenant(backend, "a", max_running=1)
    lease = take_one(backend, 0.0)
    note = "no worker here knows job 'task'"
    backend.release(ReleaseParams(token=lease.token, now=1.0, run_at=5.0, note=note))
    info = job(backend, "j0")
    assert (info.state, info.attempts, info.run_at, info.last_error) == (
        JobState.SCHEDULED,
        0,
        5.0,
        note,
    )
    row = stat(backend, "a")
    assert (row.ready, row.scheduled, row.running, row.failed) == (1, 1, 0, 0)
    assert take_one(backend, 1.0).job_id == "j1"  # the slot it held is free
    assert backend.maintain(MaintainParams(now=1.5)).next_due == 5.0
    assert backend.maintain(MaintainParams(now=5.0)).promoted == 1
    assert job(backend, "j0").state is JobState.READY
