"""A job no worker here knows goes back with a back-off that grows with its age, until the
unknown-job timeout (counted from its enqueue) makes it dead."""

from __future__ import annotations

from fairq import JobState
from fairq.contract import DequeueParams, EnqueueParams, GetJobsParams
from fairq.model import ReferenceModel
from fairq.worker.unknown import UnknownJobs

from .helpers import new_job


def test_the_back_off_grows_with_the_jobs_age_and_it_is_dead_after_the_timeout() -> None:
    store = ReferenceModel()
    store.enqueue(EnqueueParams(jobs=[new_job("j1", name="new_type")], now=0.0))
    clock = [0.0]
    unknown = UnknownJobs(
        store, clock=lambda: clock[0], timeout=300.0, app_name="old:app", declared=["task"]
    )
    run_ats = []
    for now in [0.0, 10.0, 200.0, 300.0]:
        clock[0] = now
        [lease] = store.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
        unknown.handle(lease, lease.deadline)
        [info] = store.get_jobs(GetJobsParams(ids=["j1"]))
        if info.state is JobState.SCHEDULED:
            run_ats.append(info.run_at)
            assert info.attempts == 0
            assert "no worker here knows job 'new_type'" in (info.last_error or "")
    assert run_ats == [1.0, 15.0, 260.0]  # half its age, at least 1 s; capped by the timeout
    assert info.state is JobState.DEAD
    assert "within unknown_job_timeout (300 s)" in (info.last_error or "")
