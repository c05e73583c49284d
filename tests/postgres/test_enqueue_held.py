"""One enqueue whose batch has a tenant another transaction holds (functions/enqueue.sql): that
tenant's job waits in the inbox, the others are stored and counted in at once, and the call
never waits for the holder. The ids of both parts are checked against each other's tables."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from fairq.backends.postgres.records import tenant_key
from fairq.contract import DequeueParams, EnqueueParams, GetJobsParams, StatsParams
from fairq.errors import DuplicateJob

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import Q, new_job


def rows(pg: DisposableBackend, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(server_url(), options=CALLER_CLOCK["options"]) as conn:
        return conn.execute(sql.replace("{schema}", f'"{pg.schema}"')).fetchall()


def test_a_held_tenants_job_waits_in_the_inbox_and_the_rest_is_stored(
    pg: DisposableBackend,
) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(1, "a"), new_job(2, "b")], now=1.0))
    with (
        psycopg.connect(server_url(), options=CALLER_CLOCK["options"]) as holder,
        holder.transaction(),
    ):
        holder.execute(  # as a dispatch or an ack of tenant a would
            f'SELECT id FROM "{pg.schema}".tenants WHERE queue = %s AND tenant_key = %s FOR UPDATE',
            ["default", tenant_key("a")],
        )
        urgent = dataclasses.replace(new_job(4, "b"), priority=5)
        pg.enqueue(EnqueueParams(jobs=[new_job(3, "a"), urgent, new_job(5, "b")], now=2.0))
        assert rows(pg, "SELECT id FROM {schema}.inbox ORDER BY seq") == [("j3",)]
        # b: counted in, its head the urgent job (priority first, then enqueue order)
        assert rows(
            pg,
            "SELECT t.ready, j.id FROM {schema}.tenants t JOIN {schema}.jobs j "
            "ON j.seq = t.head_seq WHERE t.tenant = 'b'",
        ) == [(3, "j4")]
        # an id waiting in the inbox, and one stored, refused with nothing of the batch stored
        with pytest.raises(DuplicateJob, match=r"j3 \(waiting to be taken in\)"):
            pg.enqueue(EnqueueParams(jobs=[new_job(6, "b"), new_job(3, "b")], now=3.0))
        with pytest.raises(DuplicateJob, match=r"j2 \(queued, running or dead\)"):
            pg.enqueue(EnqueueParams(jobs=[new_job(7, "c"), new_job(2, "a")], now=3.0))
        assert pg.get_jobs(GetJobsParams(ids=["j6", "j7"])) == []
    # the holder is gone: the next enqueue of a takes its inbox row in first, in enqueue order
    pg.enqueue(EnqueueParams(jobs=[new_job(8, "a")], now=4.0))
    assert rows(pg, "SELECT count(*) FROM {schema}.inbox") == [(0,)]
    assert rows(
        pg,
        "SELECT j.id FROM {schema}.jobs j JOIN {schema}.tenants t ON t.id = j.tenant_id "
        "WHERE t.tenant = 'a' ORDER BY j.seq",
    ) == [("j1",), ("j3",), ("j8",)]
    assert rows(pg, "SELECT ready FROM {schema}.tenants WHERE tenant = 'a'") == [(3,)]


def counts(pg: DisposableBackend) -> dict[str, tuple[int, int, int, float | None]]:
    return {
        row.tenant: (row.ready, row.scheduled, row.running, row.oldest_ready_at)
        for row in pg.stats(StatsParams())
    }


def test_stats_count_the_jobs_waiting_in_the_inbox(pg: DisposableBackend) -> None:
    """What `fairq stats`, the dashboard and /metrics read: a job enqueued while its tenant was
    held is ready (or scheduled) at once, not only after the next dispatch takes it in; so is a
    job of a tenant known only to the inbox (enqueued in a caller's transaction)."""
    pg.enqueue(EnqueueParams(jobs=[new_job(1, "a")], now=1.0))
    pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=1.5))  # a: running, none ready
    with (
        psycopg.connect(server_url(), options=CALLER_CLOCK["options"]) as holder,
        holder.transaction(),
    ):
        holder.execute(  # as a dispatch or an ack of tenant a would
            f'SELECT id FROM "{pg.schema}".tenants WHERE queue = %s AND tenant_key = %s FOR UPDATE',
            [Q, tenant_key("a")],
        )
        later = new_job(3, "a", run_at=50.0)
        pg.enqueue(EnqueueParams(jobs=[new_job(2, "a"), later, new_job(4, "b")], now=2.0))
        assert rows(pg, "SELECT id FROM {schema}.inbox ORDER BY seq") == [("j2",), ("j3",)]
        assert counts(pg) == {"a": (1, 1, 1, 2.0), "b": (1, 0, 0, 2.0)}
        assert pg.stats(StatsParams(queue=Q, tenant="a"))[0].ready == 1
    with psycopg.connect(server_url(), options=CALLER_CLOCK["options"]) as conn:
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(5, "c", queue="other")], now=3.0))
    (c,) = pg.stats(StatsParams(queue="other"))
    assert (c.tenant, c.weight, c.ready, c.oldest_ready_at) == ("c", 1.0, 1, 3.0)
    # taken in by the next enqueue of a: counted once, in the tenant's own counts now
    pg.enqueue(EnqueueParams(jobs=[new_job(6, "a")], now=4.0))
    assert rows(pg, "SELECT count(*) FROM {schema}.inbox WHERE queue = 'default'") == [(0,)]
    assert counts(pg)["a"] == (2, 1, 1, 2.0)
