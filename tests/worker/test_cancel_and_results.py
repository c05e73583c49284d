"""Cancel requests and kept results with real worker processes on a real SQLite file: a running
``def`` job sees the request and ends cancelled, an ``async def`` one is cancelled, an
iterative one stops at its next cursor; ``App.result`` waits for a job's return value."""

from __future__ import annotations

import pytest

from fairq import CancelOutcome, JobFailed, JobState

from .conftest import Store
from .helpers import job, marks, wait_for, wait_state

pytestmark = pytest.mark.processes


def test_a_running_def_job_sees_the_request_and_ends_cancelled(store: Store) -> None:
    wd = str(store.workdir)
    job_id = store.app.jobs["until_cancelled"].enqueue("t1", wd, "sync")
    other = store.app.jobs["record"].enqueue("t1", wd, "after")
    worker = store.worker("--concurrency", "1")
    wait_for(lambda: "sync" in marks(store.workdir, "started"), "the job to start")
    assert store.app.cancel(job_id) is CancelOutcome.REQUESTED
    info = wait_state(store.app, job_id, JobState.CANCELLED)
    # stopped on the request: failed with no retry, and no traceback (runner.py, `_finish`)
    assert (info.last_error or "").startswith("cancelled on request (JobCancelled: ")
    assert "Traceback" not in (info.last_error or "")
    assert "sync" in marks(store.workdir, "stopped")
    assert info.attempts == 1  # never retried
    wait_state(store.app, other, JobState.SUCCEEDED)  # the worker carries on
    worker.wait_log("outcome=cancelled")
    (row,) = store.app.stats(tenant="t1")
    assert (row.cancelled, row.failed, row.dead, row.running) == (1, 0, 0, 0)
    assert store.app.cancel(job_id) is CancelOutcome.FINISHED


def test_an_async_job_is_cancelled(store: Store) -> None:
    job_id = store.app.jobs["until_cancelled_async"].enqueue("t1", str(store.workdir), "a")
    store.worker()
    wait_for(lambda: "a" in marks(store.workdir, "started"), "the job to start")
    assert store.app.cancel(job_id) is CancelOutcome.REQUESTED
    info = wait_state(store.app, job_id, JobState.CANCELLED)
    assert "a" in marks(store.workdir, "cancelled")
    assert (info.last_error or "").startswith("cancelled on request (CancelledError")
    assert info.attempts == 1


def test_an_iterative_job_stops_at_its_next_cursor(store: Store) -> None:
    job_id = store.app.jobs["count_until_cancelled"].enqueue("t1", str(store.workdir))
    store.worker()
    wait_for(lambda: "count" in marks(store.workdir, "started"), "the iteration to start")
    assert store.app.cancel(job_id) is CancelOutcome.REQUESTED
    info = wait_state(store.app, job_id, JobState.CANCELLED)
    assert "stopped at cursor" in (info.last_error or "")


def test_a_ready_job_cancelled_before_any_worker_never_runs(store: Store) -> None:
    wd = str(store.workdir)
    job_id = store.app.jobs["record"].enqueue("t1", wd, "never")
    other = store.app.jobs["record"].enqueue("t1", wd, "runs")
    assert store.app.cancel_many([job_id, "no-such-id"]) == [
        CancelOutcome.CANCELLED,
        CancelOutcome.UNKNOWN,
    ]
    assert store.worker("--burst").exit_code() == 0
    assert set(marks(store.workdir, "done")) == {"runs"}
    assert job(store.app, job_id).state is JobState.CANCELLED
    assert job(store.app, other).state is JobState.SUCCEEDED


def test_result_waits_for_the_return_value(store: Store) -> None:
    sync_id = store.app.jobs["answer"].enqueue("t1", 4)
    async_id = store.app.jobs["answer_async"].enqueue("t2", 21)
    store.worker()
    expected = {"n": 4, "squares": [0, 1, 4, 9], "tenant": "t1"}
    assert store.app.result(sync_id, timeout=30) == expected
    assert store.app.result(async_id, timeout=30) == 42
    info = job(store.app, sync_id)
    assert info.result == expected
    assert info.result_until is not None and info.finished_at is not None
    assert info.result_until == pytest.approx(info.finished_at + 3600.0)


def test_a_return_value_that_is_not_json_fails_the_job_naming_it(store: Store) -> None:
    job_id = store.app.jobs["bad_answer"].enqueue("t1")
    after = store.app.jobs["answer"].enqueue("t1", 2)
    worker = store.worker()
    with pytest.raises(JobFailed) as failed:
        store.app.result(job_id, timeout=30)
    message = str(failed.value)
    assert "is dead" in message and "'bad_answer'" in message and "set" in message
    info = job(store.app, job_id)
    assert (info.state, info.attempts) == (JobState.DEAD, 2)  # retried as any failure
    assert (info.last_error or "").startswith("ResultError: job 'bad_answer'")
    assert store.app.result(after, timeout=30)["n"] == 2  # the worker carries on
    assert "outcome=dead" in worker.log()
