"""Failures, retries, dead letters, and jobs that wait for their time."""

from __future__ import annotations

from fairq.contract import Backend, FailParams, ListDeadParams, MaintainParams, RequeueParams
from fairq.job import JobState, Lease

from .helpers import ack, enqueue, job, new_job, new_jobs, stat, take, take_one


def fail(backend: Backend, lease: Lease, now: float, retry_at: float | None) -> JobState:
    params = FailParams(
        token=lease.token, now=now, error=f"boom {lease.attempt}", retry_at=retry_at
    )
    return backend.fail(params).state


def test_a_job_failing_every_attempt_ends_dead_never_lost(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=3)])
    states = [fail(backend, take_one(backend, t), t + 0.5, retry_at=t + 0.5) for t in (0, 1, 2)]
    assert states == [JobState.READY, JobState.READY, JobState.DEAD]
    info = job(backend, "j0")
    assert (info.state, info.attempts, info.last_error, info.finished_at) == (
        JobState.DEAD,
        3,
        "boom 3",
        2.5,
    )
    row = stat(backend, "a")
    assert (row.ready, row.running, row.failed, row.dead) == (0, 0, 3, 1)
    assert [d.id for d in backend.list_dead(ListDeadParams())] == ["j0"]
    assert take(backend, 10.0) == []


def test_fail_without_retry_makes_the_job_dead_at_once(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=5)])
    assert fail(backend, take_one(backend), 1.0, retry_at=None) is JobState.DEAD
    assert job(backend, "j0").attempts == 1


def test_expired_leases_count_as_attempts_up_to_dead(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=2, lease=10.0)])
    take_one(backend, 0.0)
    take_one(backend, 10.0)
    (expired,) = backend.maintain(MaintainParams(now=20.0)).expired
    assert (expired.job_id, expired.attempt, expired.dead) == ("j0", 2, True)
    info = job(backend, "j0")
    assert (info.state, info.attempts, info.last_error) == (JobState.DEAD, 2, "lease expired")
    assert (stat(backend, "a").failed, stat(backend, "a").dead) == (2, 1)


def test_requeue_gives_a_dead_job_fresh_attempts_and_it_can_succeed(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=1), new_job(1, "a", max_attempts=1)])
    fail(backend, take_one(backend), 1.0, retry_at=1.0)
    assert backend.requeue(RequeueParams(ids=["j0", "j1", "nope"], now=2.0)) == 1
    info = job(backend, "j0")
    assert (info.state, info.attempts) == (JobState.READY, 0)
    assert (stat(backend, "a").ready, stat(backend, "a").dead) == (2, 0)
    assert backend.list_dead(ListDeadParams()) == []
    lease = take_one(backend, 2.0)
    assert (lease.job_id, lease.attempt) == ("j0", 1)  # it keeps its place in the FIFO
    ack(backend, lease, 3.0)
    assert job(backend, "j0").state is JobState.SUCCEEDED


def test_list_dead_is_oldest_death_first_and_filters(backend: Backend) -> None:
    jobs = [new_job(n, t, max_attempts=1, learn_cost=False) for n, t in enumerate("abab")]
    enqueue(backend, jobs)  # each charged 1 s: a and b take turns
    for t in (1.0, 2.0, 3.0, 4.0):
        fail(backend, take_one(backend, t), t, retry_at=None)
    died = [(d.id, d.finished_at) for d in backend.list_dead(ListDeadParams())]
    assert died == [(f"j{n}", n + 1.0) for n in range(4)]
    assert [d.id for d in backend.list_dead(ListDeadParams(tenant="b"))] == ["j1", "j3"]
    assert [d.id for d in backend.list_dead(ListDeadParams(limit=1))] == ["j0"]
    assert backend.list_dead(ListDeadParams(queue="other")) == []


def test_a_retry_in_the_future_waits_scheduled_until_its_time(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    assert fail(backend, take_one(backend, 0.0), 1.0, retry_at=30.0) is JobState.SCHEDULED
    assert (stat(backend, "a").scheduled, stat(backend, "a").ready) == (1, 0)
    assert take(backend, 29.999) == []
    lease = take_one(backend, 30.0)
    assert (lease.job_id, lease.attempt) == ("j0", 2)


def test_maintain_promotes_due_jobs(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", run_at=50.0), new_job(1, "a", run_at=20.0)])
    result = backend.maintain(MaintainParams(now=10.0))
    assert (result.promoted, result.next_due) == (0, 20.0)
    result = backend.maintain(MaintainParams(now=20.0))
    assert (result.promoted, result.next_due) == (1, 50.0)
    assert job(backend, "j1").state is JobState.READY
    assert job(backend, "j0").state is JobState.SCHEDULED


def test_a_delayed_job_is_not_handed_out_before_its_time(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", run_at=100.0), new_job(1, "a", lease=1000.0)], now=0.0)
    assert job(backend, "j0").state is JobState.SCHEDULED
    assert (stat(backend, "a").scheduled, stat(backend, "a").ready) == (1, 1)
    assert take_one(backend, 0.0).job_id == "j1"
    assert take(backend, 99.0) == []
    assert take_one(backend, 100.0).job_id == "j0"


def test_a_job_whose_time_has_passed_is_ready_at_once(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", run_at=5.0)], now=10.0)
    assert job(backend, "j0").state is JobState.READY
    assert take_one(backend, 10.0).job_id == "j0"


def test_a_job_retried_at_once_keeps_its_place_in_its_tenants_fifo(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a"), new_job(1, "a")])
    fail(backend, take_one(backend, 0.0), 1.0, retry_at=1.0)
    assert take_one(backend, 1.0).token == "j0:2"


def test_a_delayed_job_takes_its_enqueue_order_place_when_it_becomes_ready(
    backend: Backend,
) -> None:
    """The ready FIFO is ordered by priority, then enqueue order, however a job got there."""
    enqueue(backend, [new_job(0, "a", run_at=10.0), *new_jobs("a", range(1, 5), lease=100.0)])
    assert take_one(backend, 0.0).job_id == "j1"
    assert take_one(backend, 10.0).job_id == "j0"
    assert take_one(backend, 10.0).job_id == "j2"
