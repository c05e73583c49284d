"""``App.cancel`` on jobs relayed to real Dramatiq workers: a job asked to stop while its
message waits in the broker never runs; a running one sees the request through
``fairq.current_job()`` and, stopping on it, ends cancelled (fairq/relay/runs.py)."""

from __future__ import annotations

import pytest
from conftest import Harness, wait_for

from fairq import JobState
from fairq.cancel import CancelOutcome


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_job_cancelled_while_its_message_waits_never_runs(harness: Harness) -> None:
    # a lease far longer than the test: only the worker's claim can end the job, not expiry
    work = harness.use_lease(600.0).work
    job_id = work.send("acme", 1, 0.0).message_id
    harness.relay(in_flight=4)
    app = harness.actors.fair.app

    def relayed() -> bool:
        info = app.job_info(job_id)
        return info is not None and info.state is JobState.RUNNING

    wait_for(relayed, "the relay to hand the job to the broker")
    assert app.cancel(job_id) is CancelOutcome.REQUESTED
    harness.worker(threads=1)
    harness.wait_jobs([job_id], JobState.CANCELLED)
    info = app.job_info(job_id)
    assert info is not None and info.last_error == "cancelled on request before it started"
    assert info.attempts == 1
    # the worker went on with the messages after it
    later = work.send("acme", 2, 0.0).message_id
    harness.wait_jobs([later], JobState.SUCCEEDED)
    assert [r.n for r in harness.records("start")] == [2]


@pytest.mark.parametrize("kind", ["redis"])
def test_a_running_job_sees_the_request_and_ends_cancelled(harness: Harness) -> None:
    # heartbeats every third of the lease: the request reaches the job within 0.5 s
    stoppable = harness.use_lease(1.5).stoppable
    job_id = stoppable.send("acme", 1).message_id
    harness.worker(threads=1)
    harness.relay(in_flight=1)
    wait_for(lambda: harness.records("start"), "the job to start")
    assert harness.actors.fair.app.cancel(job_id) is CancelOutcome.REQUESTED
    harness.wait_jobs([job_id], JobState.CANCELLED)
    assert [(r.event, r.n) for r in harness.records()] == [("start", 1), ("end", 1)]
    info = harness.actors.fair.app.job_info(job_id)
    assert info is not None and info.attempts == 1  # never retried
