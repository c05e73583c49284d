"""Interruptible iteration in the simulator: jobs run in parts and hand their worker back.

``iteration`` is the talk's strategy on a plain FIFO queue (a long job re-enqueues itself at
the back every slice); ``fairq:slice=`` is fairq's ``App.iterative_job``, the reference model
releasing the job at each slice's end. All on the virtual clock: exact times, no timing.
"""

from __future__ import annotations

import itertools

import pytest

from fairq.errors import ConfigError
from fairq.sim.engine import Record, SimJob, simulate
from fairq.sim.metrics import figures
from fairq.sim.strategies import build
from fairq.sim.workloads import make


def _job(job_id: int, tenant: str, arrival: float, duration: float) -> SimJob:
    return SimJob(id=job_id, arrival=arrival, tenant=tenant, duration=duration, cost=duration)


def _by_id(records: list[Record]) -> dict[int, Record]:
    return {r.job.id: r for r in records}


def test_a_long_job_on_fifo_hands_its_worker_back_every_slice() -> None:
    jobs = [_job(0, "export", 0.0, 100.0), _job(1, "small", 10.0, 1.0)]
    records = _by_id(simulate(jobs, build("iteration:slice=30", {}), workers=1, seed=1))
    assert records[1].start == 30.0  # the first slice's end, not the export's (100 s)
    assert records[0].parts == ((0.0, 30.0), (31.0, 61.0), (61.0, 91.0), (91.0, 100.0 + 1.0))
    assert (records[0].start, records[0].finish) == (0.0, 101.0)


def test_without_slices_the_same_small_job_waits_for_the_whole_export() -> None:
    jobs = [_job(0, "export", 0.0, 100.0), _job(1, "small", 10.0, 1.0)]
    records = _by_id(simulate(jobs, build("fifo", {}), workers=1, seed=1))
    assert records[1].start == 100.0 and records[0].parts == ()


def test_fairq_releases_an_iterative_job_and_charges_its_slices() -> None:
    """One worker. A 300-s export starts at 0; ten 1-s jobs of another tenant arrive at 5 s.
    At the slice's end (30 s) the export is released, its tenant charged 30 s: the other
    tenant, charged nothing yet, runs all ten (10 s < 30 s) before the export resumes."""
    jobs = [_job(0, "export", 0.0, 300.0)] + [_job(i, "small", 5.0, 1.0) for i in range(1, 11)]
    records = _by_id(simulate(jobs, build("fairq:slice=30", {}), workers=1, seed=1))
    assert [records[i].start for i in range(1, 11)] == [30.0 + i for i in range(10)]
    export = records[0]
    assert export.parts[:2] == ((0.0, 30.0), (40.0, 70.0))
    assert len(export.parts) == 10 and export.finish == 310.0
    assert sum(end - start for start, end in export.runs()) == 300.0


def test_plain_fairq_lets_the_export_hold_the_worker() -> None:
    jobs = [_job(0, "export", 0.0, 300.0)] + [_job(i, "small", 5.0, 1.0) for i in range(1, 11)]
    records = _by_id(simulate(jobs, build("fairq", {}), workers=1, seed=1))
    assert records[1].start == 300.0


@pytest.mark.parametrize("spec", ["iteration:slice=30", "fairq:slice=30"])
def test_slices_bound_how_long_small_tenants_starve_beside_long_exports(spec: str) -> None:
    """``batches``: 2 tenants with 2 exports of 600 s each on 4 workers, 10 small tenants.
    Run whole, the exports take every worker at t=0 and a small tenant starves for most of
    an export; in 30-s slices no tenant waits with nothing running for more than a slice."""
    workload = make(
        "batches", 2, {"batch_jobs": "2", "batch": "600", "small": "10", "per_small": "10"}
    )
    whole = figures(simulate(workload.jobs, build("fifo", {}), workers=4, seed=2), workers=4)
    sliced = figures(simulate(workload.jobs, build(spec, {}), workers=4, seed=2), workers=4)
    assert whole.starvation > 500.0 and whole.starved_tenant is not None
    assert whole.starved_tenant.startswith("small-")
    assert sliced.starvation <= 30.0 + 1.0  # a slice, and the small job before it
    # no worker idle while a job waited (to float rounding)
    assert sliced.efficiency == pytest.approx(1.0) and whole.efficiency == pytest.approx(1.0)
    assert (
        sum(len(r.parts) for r in simulate(workload.jobs, build(spec, {}), workers=4, seed=2))
        >= 4 * 600 / 30
    )


def test_every_part_of_every_job_runs_once_and_adds_up_to_its_duration() -> None:
    workload = make(
        "batches", 4, {"batch_jobs": "3", "batch": "95", "small": "5", "per_small": "8"}
    )
    for spec in ("iteration:slice=7", "fairq:slice=7"):
        records = simulate(workload.jobs, build(spec, {}), workers=3, seed=4)
        assert sorted(r.job.id for r in records) == list(range(len(workload.jobs)))
        for r in records:
            spans = r.runs()
            assert sum(end - start for start, end in spans) == pytest.approx(r.job.duration)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
            assert spans[0][0] >= r.job.arrival and spans[-1][1] == r.finish


@pytest.mark.parametrize("spec", ["iteration:slice=0", "fairq:slice=-1"])
def test_a_slice_must_be_positive(spec: str) -> None:
    with pytest.raises(ConfigError, match="slice must be a positive number of seconds"):
        build(spec, {})
