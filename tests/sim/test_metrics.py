"""The fairness figures' building blocks, on records small enough to check by hand."""

from __future__ import annotations

import pytest

from fairq.sim.engine import Record, SimJob
from fairq.sim.metrics import (
    backlogged_windows,
    efficiency,
    makespan_bound,
    misallocated,
    starvation,
)


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


def _parts(tenant: str, arrival: float, *spans: tuple[float, float]) -> Record:
    job = SimJob(
        id=0, arrival=arrival, tenant=tenant, duration=sum(e - s for s, e in spans), cost=1.0
    )
    return Record(
        job=job,
        start=spans[0][0],
        finish=spans[-1][1],
        worker=0,
        parts=spans if len(spans) > 1 else (),
    )


def test_starvation_is_the_longest_wait_with_nothing_running() -> None:
    # Job a waits 0-5 (nothing runs: 5 s), runs 5-8; job b arrived at 6 and waits while a
    # runs (not starving), then 8-20 with nothing running (12 s), and runs 20-21.
    records = [_parts("t", 0.0, (5.0, 8.0)), _parts("t", 6.0, (20.0, 21.0))]
    assert starvation(records) == 12.0


def test_a_job_handed_back_between_its_parts_waits_again() -> None:
    # Parts 0-30 and 50-60: handed back at 30, waiting with nothing running until 50.
    assert starvation([_parts("t", 0.0, (0.0, 30.0), (50.0, 60.0))]) == 20.0


def test_efficiency_counts_the_workers_idle_while_a_job_waited() -> None:
    # Two workers. Job a runs 0-10; job b arrives at 0 and waits until 4 though a worker is
    # free (4 worker-s lost), then runs 4-10. Used 16 of the 20 it could have used.
    records = [_parts("a", 0.0, (0.0, 10.0)), _parts("b", 0.0, (4.0, 10.0))]
    assert efficiency(records, workers=2) == 16 / 20
    in_turn = [_parts("a", 0.0, (0.0, 10.0)), _parts("b", 0.0, (10.0, 16.0))]
    assert efficiency(in_turn, workers=1) == 1.0  # one worker, always busy: nothing lost
    assert efficiency(in_turn, workers=2) == 16 / 26  # a second worker sat idle 0-10


def test_misallocated_is_the_service_beyond_a_weighted_water_filling() -> None:
    weights = {"big": 3.0, "small": 1.0, "done": 1.0}
    # Exactly 3:1 between the backlogged, and "done" wanted only what it got: fair.
    assert misallocated({"big": 6.0, "small": 2.0}, {"done": 1.0}, weights) == 0.0
    # "done" was not backlogged but took 5 of 10 while two others wanted more: the fair split
    # is 2 each per weight unit (6, 2, 2); "done" got 3 too many, taken from "big".
    assert misallocated({"big": 3.0, "small": 2.0}, {"done": 5.0}, weights) == pytest.approx(3.0)


def test_the_makespan_bound_is_the_work_over_the_workers_or_the_longest_job() -> None:
    jobs = [SimJob(id=i, arrival=0.0, tenant="t", duration=1.0, cost=1.0) for i in range(8)]
    assert makespan_bound(jobs, workers=4) == 2.0
    long = SimJob(id=9, arrival=1.0, tenant="t", duration=10.0, cost=1.0)
    assert makespan_bound([*jobs, long], workers=4) == 11.0
