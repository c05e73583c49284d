"""The fairness figures' building blocks, on records small enough to check by hand."""

from __future__ import annotations

from fairq.sim.engine import Record, SimJob
from fairq.sim.metrics import backlogged_windows


def _run(job_id: int, arrival: float, start: float) -> Record:
    job = SimJob(id=job_id, arrival=arrival, tenant="t", duration=1.0, cost=1.0)
    return Record(job=job, start=start, finish=start + 1.0, worker=0)


def test_a_job_started_as_it_arrives_never_made_its_tenant_backlogged() -> None:
    # Waiting 0-10 s (windows 0..4 of 2 s), then idle; a job at t=100 starts at once.
    records = [_run(0, 0.0, 10.0), _run(1, 100.0, 100.0)]
    assert backlogged_windows(records, 2.0) == [0, 1, 2, 3, 4]


def test_a_wait_that_continues_while_another_job_starts_is_one_spell() -> None:
    # Job 0 waits 0-4; job 1 arrives at 4 as job 0 starts and waits until 9.
    records = [_run(0, 0.0, 4.0), _run(1, 4.0, 9.0)]
    assert backlogged_windows(records, 2.0) == [0, 1, 2, 3]
