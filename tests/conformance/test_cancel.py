"""Cancels (fairq/cancel.py): a scheduled or ready job is cancelled at once and its tenant's
scheduling state stays right; a running one gets a request its heartbeat reports, and from
then on it never runs again. A finished or unknown job is answered, never raised about."""

from __future__ import annotations

from fairq.contract import (
    Backend,
    CancelOutcome,
    CancelParams,
    FailParams,
    FiguresParams,
    GetJobsParams,
    HeartbeatParams,
    MaintainParams,
    ReleaseParams,
    RequeueParams,
    StatsParams,
)
from fairq.job import JobState

from .helpers import ack, enqueue, job, new_job, new_jobs, snapshot, stat, take, take_one

CANCELLED, REQUESTED = CancelOutcome.CANCELLED, CancelOutcome.REQUESTED
FINISHED, UNKNOWN = CancelOutcome.FINISHED, CancelOutcome.UNKNOWN


def cancel(backend: Backend, *ids: str, now: float = 0.0) -> list[CancelOutcome]:
    return list(backend.cancel(CancelParams(ids=ids, now=now)).outcomes)


def test_a_ready_job_is_cancelled_at_once_and_never_handed_out(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    assert cancel(backend, "j0", now=2.0) == [CANCELLED]
    info = job(backend, "j0")
    assert (info.state, info.finished_at, info.attempts) == (JobState.CANCELLED, 2.0, 0)
    assert info.last_error == "cancelled on request"
    row = stat(backend, "a")
    assert (row.ready, row.cancelled, row.succeeded, row.failed) == (1, 1, 0, 0)
    assert [lease.job_id for lease in take(backend, 3.0, limit=5)] == ["j1"]


def test_a_scheduled_job_is_cancelled_and_never_promoted(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", run_at=10.0), new_job(1, "a", run_at=20.0)])
    assert cancel(backend, "j0", now=1.0) == [CANCELLED]
    assert (stat(backend, "a").scheduled, stat(backend, "a").cancelled) == (1, 1)
    result = backend.maintain(MaintainParams(now=15.0))
    assert (result.promoted, result.next_due) == (0, 20.0)
    assert take(backend, 15.0) == []
    assert job(backend, "j0").state is JobState.CANCELLED
    assert [lease.job_id for lease in take(backend, 20.0)] == ["j1"]


def test_a_tenant_whose_last_ready_job_is_cancelled_leaves_the_eligible_index(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a")])
    enqueue(backend, new_jobs("b", [1, 2, 3]))
    assert cancel(backend, "j0") == [CANCELLED]
    # "a" would have been first (equal tags, oldest job): now only "b" has work
    assert [lease.tenant for lease in take(backend, 1.0, limit=5)] == ["b", "b", "b"]
    row = stat(backend, "a")
    assert (row.ready, row.running, row.oldest_ready_at) == (0, 0, None)


def test_cancelling_a_tenants_head_keeps_its_place_and_order(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1, 2]))
    enqueue(backend, new_jobs("b", [3, 4]))
    assert cancel(backend, "j0", "j2") == [CANCELLED, CANCELLED]
    # "a" keeps its start tag: its next job, j1, goes first, as j0 would have
    assert [lease.job_id for lease in take(backend, 1.0, limit=5)] == ["j1", "j3", "j4"]


def test_a_cancelled_head_no_longer_orders_its_tenant(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    enqueue(backend, [new_job(1, "b")])
    enqueue(backend, [new_job(2, "a")])
    assert cancel(backend, "j0") == [CANCELLED]
    # equal tags: the oldest head goes first, and "a"'s head is now j2, younger than "b"'s j1
    assert [lease.job_id for lease in take(backend, 1.0, limit=5)] == ["j1", "j2"]


def test_cancelling_a_waiting_job_of_a_capped_tenant_changes_no_slot(backend: Backend) -> None:
    from .helpers import set_tenant

    set_tenant(backend, "a", max_running=1)
    enqueue(backend, new_jobs("a", [0, 1, 2]))
    running = take_one(backend, 1.0)
    assert cancel(backend, "j1", now=2.0) == [CANCELLED]
    assert take(backend, 2.0) == []  # still at its cap
    ack(backend, running, 3.0)
    assert [lease.job_id for lease in take(backend, 3.0, limit=5)] == ["j2"]


def test_a_running_job_gets_a_request_that_its_heartbeat_reports(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    first, second = take(backend, 0.0, limit=2)
    assert cancel(backend, "j0", now=1.0) == [REQUESTED]
    info = job(backend, "j0")
    assert (info.state, info.cancel_requested) == (JobState.RUNNING, True)
    assert job(backend, "j1").cancel_requested is False
    beat = backend.heartbeat(HeartbeatParams(tokens=[first.token, second.token], now=2.0))
    assert list(beat.cancelled) == [first.token]
    assert set(beat.deadlines) == {first.token, second.token}  # the lease is still held
    assert cancel(backend, "j0", now=3.0) == [REQUESTED]  # asking again is no error


def test_a_job_failed_after_its_cancel_request_is_cancelled_never_retried(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=5)])
    lease = take_one(backend, 0.0)
    cancel(backend, "j0", now=1.0)
    info = backend.fail(
        FailParams(token=lease.token, now=4.0, error="JobCancelled: stopped", retry_at=4.0)
    )
    assert (info.state, info.finished_at, info.last_error) == (
        JobState.CANCELLED,
        4.0,
        "JobCancelled: stopped",
    )
    row = stat(backend, "a")
    assert (row.running, row.ready, row.scheduled, row.failed, row.dead, row.cancelled) == (
        0,
        0,
        0,
        0,
        0,
        1,
    )
    assert take(backend, 10.0) == []
    assert backend.requeue(RequeueParams(ids=["j0"], now=11.0)) == 0  # not dead: stays


def test_a_job_handed_back_after_its_cancel_request_is_cancelled(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    lease = take_one(backend, 0.0)
    cancel(backend, "j0", now=1.0)
    backend.release(ReleaseParams(token=lease.token, now=2.0))
    info = job(backend, "j0")
    assert (info.state, info.last_error) == (JobState.CANCELLED, "cancelled on request")
    assert take(backend, 3.0) == []


def test_an_expired_lease_after_a_cancel_request_ends_the_job_cancelled(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0, max_attempts=3)])
    take_one(backend, 0.0)
    cancel(backend, "j0", now=1.0)
    (expired,) = backend.maintain(MaintainParams(now=20.0)).expired
    assert (expired.job_id, expired.dead, expired.cancelled) == ("j0", False, True)
    assert job(backend, "j0").state is JobState.CANCELLED
    assert stat(backend, "a").cancelled == 1
    assert take(backend, 21.0) == []


def test_a_job_that_finishes_before_it_stops_succeeds(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    lease = take_one(backend, 0.0)
    cancel(backend, "j0", now=1.0)
    ack(backend, lease, 2.0)
    info = job(backend, "j0")
    assert (info.state, info.cancel_requested) == (JobState.SUCCEEDED, False)
    assert (stat(backend, "a").succeeded, stat(backend, "a").cancelled) == (1, 0)


def test_finished_and_unknown_jobs_are_answered_and_nothing_changes(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", max_attempts=1), new_job(1, "a"), new_job(2, "a")])
    done, failed = take(backend, 0.0, limit=2)
    ack(backend, done, 1.0)
    backend.fail(FailParams(token=failed.token, now=1.0, error="boom", retry_at=None))
    assert cancel(backend, "j2", now=1.0) == [CANCELLED]
    ids = ["j0", "j1", "j2", "nope"]
    before = snapshot(backend, ids)
    assert cancel(backend, "j0", "j1", "j2", "nope", now=2.0) == [
        FINISHED,
        FINISHED,
        FINISHED,
        UNKNOWN,
    ]
    assert snapshot(backend, ids) == before
    assert cancel(backend, now=2.0) == []


def test_one_call_cancels_in_the_order_given(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    assert cancel(backend, "j0", "j0", "j1", now=1.0) == [CANCELLED, FINISHED, CANCELLED]
    assert stat(backend, "a").cancelled == 2


def test_a_run_its_worker_ended_on_the_request_counts_as_cancelled_in_figures(
    backend: Backend,
) -> None:
    enqueue(backend, new_jobs("a", [0, 1, 2]))
    stopped, done = take(backend, 0.0, limit=2)
    cancel(backend, "j0", "j2", now=1.0)
    backend.fail(FailParams(token=stopped.token, now=2.0, error="stopped", retry_at=2.0))
    ack(backend, done, 2.0)
    (row,) = backend.figures(FiguresParams(now=3.0))
    # a run cancelled by its worker: a run time and the outcome; one cancelled before it ran
    # had no run (TenantStats.cancelled counts both)
    assert dict(row.outcomes) == {"succeeded": 1, "cancelled": 1}
    assert sum(row.run) == 2
    assert stat(backend, "a").cancelled == 2


def test_cancelled_jobs_are_pruned_after_the_retention(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    cancel(backend, "j0", now=1.0)
    assert backend.maintain(MaintainParams(now=5.0, retention=10.0)).pruned == 0
    assert job(backend, "j0").state is JobState.CANCELLED
    cancel(backend, "j1", now=6.0)
    assert backend.maintain(MaintainParams(now=12.0, retention=10.0)).pruned == 1
    assert backend.get_jobs(GetJobsParams(ids=["j0", "j1"]))[0].id == "j1"
    assert backend.maintain(MaintainParams(now=20.0, retention=10.0)).pruned == 1
    # the tenant had nothing else stored and no settings: forgotten, as after succeeded jobs
    assert backend.stats(StatsParams(tenant="a")) == []


def test_a_cancel_in_one_queue_leaves_other_queues_alone(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", queue="q1"), new_job(1, "a", queue="q2")])
    assert cancel(backend, "j0") == [CANCELLED]
    assert [lease.job_id for lease in take(backend, 1.0, queues=["q1", "q2"], limit=3)] == ["j1"]
