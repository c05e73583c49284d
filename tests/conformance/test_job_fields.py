"""What a lease tells its worker besides the job: when the job became ready (so its wait is
``started_at - ready_at``) and the headers it was enqueued with."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fairq.contract import Backend, FailParams, ReleaseParams
from fairq.errors import JobHeadersError
from fairq.job import JobState

from .helpers import ack, enqueue, job, new_job, snapshot, take, take_one

TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def test_a_job_ready_at_enqueue_is_ready_from_then(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", run_at=-5.0)], now=2.0)  # a run_at past: ready at enqueue
    assert job(backend, "j0").ready_at == 2.0
    lease = take_one(backend, 7.0)
    assert (lease.ready_at, lease.started_at) == (2.0, 7.0)
    assert job(backend, "j0").ready_at == 2.0


def test_a_delayed_job_is_ready_from_its_run_at_not_from_when_it_was_promoted(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", run_at=5.0)], now=1.0)
    assert job(backend, "j0").ready_at is None
    lease = take_one(backend, 9.0)
    assert (lease.ready_at, lease.started_at) == (5.0, 9.0)


def test_a_retried_job_is_ready_from_when_its_retry_became_due(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a"), new_job(1, "a")])
    first, second = take(backend, 1.0, limit=2)
    backend.fail(FailParams(token=first.token, now=2.0, error="boom", retry_at=4.0))
    backend.fail(FailParams(token=second.token, now=3.0, error="boom", retry_at=3.0))
    again = take(backend, 8.0, limit=2)
    assert {(lease.job_id, lease.attempt, lease.ready_at) for lease in again} == {
        ("j0", 2, 4.0),
        ("j1", 2, 3.0),
    }


def test_a_job_handed_back_is_ready_from_the_hand_back(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    backend.release(ReleaseParams(token=take_one(backend, 1.0).token, now=2.5))
    assert take_one(backend, 6.0).ready_at == 2.5


def test_headers_are_stored_and_given_back_in_every_lease_and_inspection(
    backend: Backend,
) -> None:
    odd = {"tenant:{x}": "ünïcode ✓", "": "", "k": "line\nbreak \x00 nul"}
    jobs = [replace(new_job(0, "a"), headers=TRACE), replace(new_job(1, "b"), headers=odd)]
    enqueue(backend, [*jobs, new_job(2, "c")])
    leases = {lease.job_id: lease for lease in take(backend, 1.0, limit=3)}
    assert (leases["j0"].headers, leases["j1"].headers, leases["j2"].headers) == (TRACE, odd, {})
    backend.fail(FailParams(token=leases["j0"].token, now=2.0, error="boom", retry_at=2.0))
    assert take_one(backend, 3.0).headers == TRACE  # a retry keeps them
    ack(backend, leases["j1"], 3.0)
    succeeded = job(backend, "j1")
    assert (succeeded.state, succeeded.headers, succeeded.ready_at) == (
        JobState.SUCCEEDED,
        odd,
        0.0,
    )


def test_bad_headers_are_refused_before_any_store_sees_them(backend: Backend) -> None:
    enqueue(backend, [replace(new_job(0, "a"), headers=TRACE)])
    before = snapshot(backend, ["j0", "j1"])
    for bad in ({"n": 1}, {"big": "x" * 5000}, "traceparent=1"):
        with pytest.raises(JobHeadersError):
            enqueue(backend, [new_job(1, "a"), replace(new_job(2, "a"), headers=bad)])  # type: ignore[arg-type]
    assert snapshot(backend, ["j0", "j1"]) == before
