"""SQLite-specific behaviour beyond the shared rules: threads, retention, closing, bulk enqueue."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    MaintainParams,
    StatsParams,
)
from fairq.errors import DuplicateJob, StoreUnavailable
from tests.sqlite.helpers import new_job


def test_threads_sharing_one_backend_never_get_the_same_job(backend: SQLiteBackend) -> None:
    jobs = [new_job(f"j{i}", f"t{i % 7}") for i in range(400)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    taken: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def work(mine: list[str]) -> None:
        start.wait()
        params = DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=2)
        while leases := backend.dequeue(params).leases:
            for lease in leases:
                backend.ack_many(AckManyParams(tokens=[lease.token], now=2.0))
                mine.append(lease.job_id)

    threads = [threading.Thread(target=work, args=(mine,)) for mine in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    everything = [job_id for mine in taken for job_id in mine]
    assert sorted(everything) == sorted(job.id for job in jobs)


def test_retention_prunes_old_succeeded_jobs_but_keeps_counters(backend: SQLiteBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(f"j{i}") for i in range(3)], now=0.0))
    for finished in (10.0, 20.0, 30.0):
        (lease,) = backend.dequeue(
            DequeueParams(queues=["default"], worker_id="w", now=finished)
        ).leases
        backend.ack_many(AckManyParams(tokens=[lease.token], now=finished))
    result = backend.maintain(MaintainParams(now=100.0, retention=75.0))
    assert result.pruned == 2  # finished at 10 and 20, before 100 - 75
    assert [j.id for j in backend.get_jobs(GetJobsParams(ids=["j0", "j1", "j2"]))] == ["j2"]
    (row,) = backend.stats(StatsParams())
    assert row.succeeded == 3


def test_maintain_reports_when_it_is_next_due(backend: SQLiteBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job("now"), new_job("later", run_at=50.0)], now=0.0))
    backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0))  # lease to 31
    assert backend.maintain(MaintainParams(now=2.0)).next_due == 31.0
    assert backend.maintain(MaintainParams(now=2.0, queues=["other"])).next_due is None


def test_a_duplicate_id_stores_nothing(backend: SQLiteBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job("old")], now=0.0))
    with pytest.raises(DuplicateJob, match="'old'"):
        backend.enqueue(EnqueueParams(jobs=[new_job("new", "b"), new_job("old")], now=0.0))
    with pytest.raises(DuplicateJob, match="'twice'"):
        backend.enqueue(EnqueueParams(jobs=[new_job("twice"), new_job("twice")], now=0.0))
    assert [(r.tenant, r.ready) for r in backend.stats(StatsParams())] == [("a", 1)]


def test_bulk_enqueue_of_many_tenants_in_one_call(backend: SQLiteBackend) -> None:
    jobs = [new_job(f"j{i}", f"t{i % 500}") for i in range(1500)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    rows = backend.stats(StatsParams())
    assert len(rows) == 500 and {r.ready for r in rows} == {3}
    leases = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=1, limit=500)
    ).leases
    assert len({lease.tenant for lease in leases}) == 500  # one turn each before any second


def test_a_closed_backend_says_so(db_path: Path) -> None:
    backend = SQLiteBackend(db_path)
    backend.close()
    backend.close()  # closing twice is harmless
    with pytest.raises(StoreUnavailable, match="closed"):
        backend.stats(StatsParams())
