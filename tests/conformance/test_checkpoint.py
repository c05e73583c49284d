"""Checkpoints: an iterative job's progress is stored with it under its lease, which the call
extends and charges like a heartbeat; the progress stays through hand-backs, retries, expiries
and requeues, so the next run resumes from it. A lease not held is refused, changing nothing."""

from __future__ import annotations

import pytest

from fairq.contract import (
    Backend,
    CheckpointParams,
    FailParams,
    MaintainParams,
    ReleaseParams,
    RequeueParams,
)
from fairq.errors import LeaseExpired, LeaseNotFound
from fairq.job import JobState, Progress

from .helpers import ack, enqueue, job, new_job, new_jobs, snapshot, take, take_one


def saved(cursor: object, items: int, slices: int = 0) -> str:
    return Progress(cursor=cursor, items=items, slices=slices).encode()


def test_a_checkpoint_stores_progress_and_extends_the_lease(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0)])
    lease = take_one(backend, 1.0)
    assert job(backend, "j0").progress is None
    result = backend.checkpoint(
        CheckpointParams(token=lease.token, progress=saved({"after": "r9"}, 10), now=5.0)
    )
    assert result.deadline == 15.0
    info = job(backend, "j0")
    assert info.progress == Progress(cursor={"after": "r9"}, items=10, slices=0)
    assert (info.state, info.deadline) == (JobState.RUNNING, 15.0)
    backend.checkpoint(CheckpointParams(token=lease.token, progress=saved([1, "é"], 11), now=6.0))
    assert job(backend, "j0").progress == Progress(cursor=[1, "é"], items=11)
    # The extended lease holds past the first deadline.
    assert backend.maintain(MaintainParams(now=12.0)).expired == []


def test_a_checkpoint_charges_the_run_so_far_like_a_heartbeat(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(10), lease=100.0))
    enqueue(backend, new_jobs("b", range(10, 40), lease=100.0))
    long_job, short_job = take(backend, 0.0, limit=2)
    ack(backend, short_job, 1.0)
    backend.checkpoint(CheckpointParams(token=long_job.token, progress=saved(5, 5), now=10.0))
    tenants = [lease.tenant for lease in take(backend, 10.0, limit=10)]
    assert tenants == ["b"] * 9 + ["a"]  # as test_charging's heartbeat


def test_progress_stays_through_a_hand_back_a_retry_and_an_expiry(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0, max_attempts=5)])
    first = take_one(backend, 0.0)
    backend.checkpoint(CheckpointParams(token=first.token, progress=saved("c1", 1, 1), now=1.0))
    backend.release(ReleaseParams(token=first.token, now=2.0))
    assert job(backend, "j0").progress == Progress(cursor="c1", items=1, slices=1)

    second = take_one(backend, 3.0)
    backend.checkpoint(CheckpointParams(token=second.token, progress=saved("c2", 2, 1), now=4.0))
    failed = backend.fail(FailParams(token=second.token, now=5.0, error="boom", retry_at=5.0))
    assert failed.progress == Progress(cursor="c2", items=2, slices=1)  # fail's answer too
    assert job(backend, "j0").progress == Progress(cursor="c2", items=2, slices=1)

    third = take_one(backend, 6.0)
    backend.checkpoint(CheckpointParams(token=third.token, progress=saved("c3", 3, 1), now=7.0))
    assert [e.job_id for e in backend.maintain(MaintainParams(now=100.0)).expired] == ["j0"]
    info = job(backend, "j0")
    assert (info.state, info.progress) == (JobState.READY, Progress(cursor="c3", items=3, slices=1))


def test_progress_stays_with_a_dead_job_and_its_requeue(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0, max_attempts=1)])
    lease = take_one(backend, 0.0)
    backend.checkpoint(CheckpointParams(token=lease.token, progress=saved("c", 4), now=1.0))
    backend.fail(FailParams(token=lease.token, now=2.0, error="boom", retry_at=None))
    assert job(backend, "j0").progress == Progress(cursor="c", items=4)
    assert backend.requeue(RequeueParams(ids=["j0"], now=3.0)) == 1
    assert take_one(backend, 4.0).job_id == "j0"
    assert job(backend, "j0").progress == Progress(cursor="c", items=4)


@pytest.mark.parametrize("case", ["stale", "expired", "unknown", "finished"])
def test_a_checkpoint_without_the_lease_is_refused_and_changes_nothing(
    backend: Backend, case: str
) -> None:
    enqueue(backend, [new_job(0, "a", lease=10.0), new_job(1, "a", lease=10.0)])
    first = take_one(backend, 0.0)
    backend.checkpoint(CheckpointParams(token=first.token, progress=saved("kept", 1), now=1.0))
    token, now, error = first.token, 2.0, LeaseNotFound
    if case == "stale":
        backend.release(ReleaseParams(token=first.token, now=2.0))
    elif case == "expired":
        now, error = 11.0, LeaseExpired  # type: ignore[assignment]
    elif case == "unknown":
        token = "nope:1"
    else:
        ack(backend, first, 2.0)
    before = snapshot(backend, ["j0", "j1"])
    with pytest.raises(error):
        backend.checkpoint(CheckpointParams(token=token, progress=saved("lost", 9), now=now))
    assert snapshot(backend, ["j0", "j1"]) == before
    if case != "finished":  # a succeeded job's progress may be dropped (JobInfo.progress)
        assert job(backend, "j0").progress == Progress(cursor="kept", items=1)
