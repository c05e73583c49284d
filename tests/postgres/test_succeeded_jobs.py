"""Succeeded jobs live in their own table (schema 8): their ids stay taken, by every way in."""

from __future__ import annotations

import psycopg
import pytest

from fairq.backends.postgres.records import tenant_key
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    MaintainParams,
    StatsParams,
)
from fairq.errors import DuplicateJob
from fairq.job import JobState

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import new_job


def run_to_success(pg: DisposableBackend, n: int, now: float) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(n)], now=now))
    leases = pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now, limit=5)).leases
    tokens = [lease.token for lease in leases]
    assert pg.ack_many(AckManyParams(tokens=tokens, now=now)).acked == tokens


def test_a_plain_enqueue_of_a_succeeded_id_stores_nothing_of_its_batch(
    pg: DisposableBackend,
) -> None:
    run_to_success(pg, 0, 1.0)
    with pytest.raises(DuplicateJob, match="succeeded"):
        pg.enqueue(EnqueueParams(jobs=[new_job(1), new_job(0)], now=2.0))
    assert [job.id for job in pg.get_jobs(GetJobsParams(ids=["j0", "j1"]))] == ["j0"]
    (stats,) = pg.stats(StatsParams(queue="default"))
    assert (stats.ready, stats.succeeded) == (0, 1)


def test_an_enqueue_in_a_transaction_of_a_succeeded_id_is_refused(pg: DisposableBackend) -> None:
    run_to_success(pg, 0, 1.0)
    with (
        psycopg.connect(server_url(), **CALLER_CLOCK) as conn,
        conn.transaction(),
        pytest.raises(DuplicateJob, match="still usable"),
    ):
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(0)], now=2.0))


def test_an_inbox_job_whose_id_succeeded_meanwhile_is_dropped_when_taken_in(
    pg: DisposableBackend,
) -> None:
    """The inbox row was written before its id's job succeeded (inbox_insert's check passed),
    as when an ack in another queue moves the id while the caller's transaction is open. The
    other row of the batch is taken in (one check for the batch)."""
    run_to_success(pg, 0, 1.0)
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn, conn.transaction():
        conn.execute(
            f'INSERT INTO "{pg.schema}".inbox (id, queue, tenant, name, payload, priority, '
            "max_attempts, lease_timeout, cost, enqueued_at, run_at, tenant_key) "
            "VALUES ('j0', 'default', 'a', 'task', '[]', 0, 3, 30.0, 1.0, 0.5, 0.5, %(key)s), "
            "('j5', 'default', 'a', 'task', '[]', 0, 3, 30.0, 1.0, 0.5, 0.5, %(key)s)",
            {"key": tenant_key("a")},
        )
    pg.maintain(MaintainParams(now=2.0))
    jobs = pg.get_jobs(GetJobsParams(ids=["j0", "j5"]))
    assert [(job.state, job.finished_at) for job in jobs] == [
        (JobState.SUCCEEDED, 1.0), (JobState.READY, None),
    ]  # fmt: skip
    (stats,) = pg.stats(StatsParams(queue="default"))
    assert (stats.ready, stats.running, stats.succeeded) == (1, 0, 1)


def test_a_pruned_succeeded_id_may_be_used_again(pg: DisposableBackend) -> None:
    run_to_success(pg, 0, 1.0)
    assert pg.maintain(MaintainParams(now=100.0, retention=10.0)).pruned == 1
    pg.enqueue(EnqueueParams(jobs=[new_job(0)], now=101.0))
    (job,) = pg.get_jobs(GetJobsParams(ids=["j0"]))
    assert job.state is JobState.READY
