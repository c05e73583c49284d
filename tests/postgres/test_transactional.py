"""Enqueue inside the application's transaction: rollback → no job; commit → the job runs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pytest

from fairq.app import App
from fairq.cancel import CancelOutcome, CancelParams
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    MaintainParams,
    StatsParams,
)
from fairq.errors import DuplicateJob
from fairq.job import JobState, NewJob, Unique

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import new_job


@pytest.fixture
def conn(pg: DisposableBackend) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """The application's connection, with a table of its own."""
    with psycopg.connect(server_url(), **CALLER_CLOCK) as connection:
        connection.execute(f'CREATE TABLE "{pg.schema}".orders (id int PRIMARY KEY)')
        connection.commit()
        yield connection


def take_ids(pg: DisposableBackend, now: float = 1.0) -> list[str]:
    leases = pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now, limit=10)).leases
    return [lease.job_id for lease in leases]


def test_a_rolled_back_enqueue_leaves_no_job(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    with conn.transaction(force_rollback=True):
        conn.execute(f'INSERT INTO "{pg.schema}".orders VALUES (1)')
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(0)], now=0.0))
    assert take_ids(pg) == []
    assert pg.get_jobs(GetJobsParams(ids=["j0"])) == []
    assert pg.maintain(MaintainParams(now=1.0)).promoted == 0


def test_a_committed_enqueue_runs_and_keeps_its_place_in_enqueue_order(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    with conn.transaction():
        conn.execute(f'INSERT INTO "{pg.schema}".orders VALUES (1)')
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(1)], now=0.0))
        assert pg.get_jobs(GetJobsParams(ids=["j1"])) == []  # not visible before the commit
    pg.enqueue(EnqueueParams(jobs=[new_job(2)], now=0.0))
    (seen,) = pg.get_jobs(GetJobsParams(ids=["j1"]))  # committed, not yet taken in: shown as ready
    assert (seen.state, seen.tenant, seen.attempts) == (JobState.READY, "a", 0)
    assert take_ids(pg) == ["j0", "j1", "j2"]
    (stats,) = pg.stats(StatsParams(queue="default", tenant="a"))
    assert (stats.ready, stats.running) == (0, 3)


def test_the_first_jobs_of_a_new_queue_can_come_through_the_inbox(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    with conn.transaction():
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(0, queue="fresh")], now=0.0))
    leases = pg.dequeue(DequeueParams(queues=["fresh"], worker_id="w", now=1.0, limit=5)).leases
    assert [lease.job_id for lease in leases] == ["j0"]
    assert [row.queue for row in pg.stats(StatsParams())] == ["fresh"]


def test_maintain_takes_in_the_inbox_of_every_queue(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    with conn.transaction():
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(0, queue="q1")], now=0.0))
    pg.maintain(MaintainParams(now=1.0))
    (row,) = pg.stats(StatsParams())
    assert (row.queue, row.ready) == ("q1", 1)


def test_a_refused_enqueue_raises_and_leaves_the_callers_transaction_usable(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    with conn.transaction():
        conn.execute(f'INSERT INTO "{pg.schema}".orders VALUES (1)')
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(1)], now=0.0))
        with pytest.raises(DuplicateJob, match="still usable"):
            pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(2), new_job(0)], now=0.0))
        with pytest.raises(DuplicateJob, match="still usable"):
            pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(1)], now=0.0))  # waiting in inbox
        conn.execute(f'INSERT INTO "{pg.schema}".orders VALUES (2)')
    orders = conn.execute(f'SELECT count(*) FROM "{pg.schema}".orders').fetchone()
    assert orders == (2,)
    assert take_ids(pg) == ["j0", "j1"]  # j2 went with its refused batch


def test_an_open_application_transaction_does_not_hold_up_workers(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """The inbox takes no fairq lock: dequeue and ack go on while the caller's transaction is
    open (were a lock held, this test would hang until its timeout)."""
    pg.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    with conn.transaction():
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(1)], now=0.0))
        assert take_ids(pg) == ["j0"]
    assert take_ids(pg) == ["j1"]


def test_bound_to_routes_app_enqueues_into_the_callers_transaction(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    app = App(backend=pg)

    @app.job(tenant="shop")
    def receipt(shop: str, order: int) -> None: ...

    with conn.transaction(force_rollback=True), pg.bound_to(conn):
        dropped = receipt.enqueue("s1", 1)
    with conn.transaction(), pg.bound_to(conn):
        kept = receipt.enqueue("s1", 2)
    outside = receipt.enqueue("s2", 3)  # outside the block: an ordinary enqueue
    assert pg.get_jobs(GetJobsParams(ids=[dropped])) == []
    leases = pg.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=app.clock(), limit=5)
    ).leases
    assert sorted(lease.job_id for lease in leases) == sorted([kept, outside])


def test_the_readme_example_keeps_the_job_only_if_the_block_commits(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """docs/stores.md's PostgreSQL example, word for word, with the enqueue first or second in
    the block: an exception rolls the job back with the order; a normal exit commits both."""
    app = App(backend=pg)
    url = server_url()
    orders = f'INSERT INTO "{pg.schema}".orders VALUES (%s)'

    @app.job(tenant="account_id")
    def send_invoice(order_id: int, account_id: str) -> None: ...

    with pytest.raises(RuntimeError), psycopg.connect(url) as conn, app.backend.bound_to(conn):
        first = send_invoice.enqueue(order_id=42, account_id="7")  # the block's first statement
        conn.execute(orders, (42,))
        raise RuntimeError("the order failed")
    with pytest.raises(RuntimeError), psycopg.connect(url) as conn, app.backend.bound_to(conn):
        conn.execute(orders, (43,))
        second = send_invoice.enqueue(order_id=43, account_id="7")  # rolled back with the order
        raise RuntimeError("the order failed")
    with psycopg.connect(url) as conn, app.backend.bound_to(conn):
        kept = send_invoice.enqueue(order_id=44, account_id="7")
        conn.execute(orders, (44,))
    assert pg.get_jobs(GetJobsParams(ids=[first, second])) == []
    assert [job.id for job in pg.get_jobs(GetJobsParams(ids=[kept]))] == [kept]
    with psycopg.connect(url) as check:
        stored = check.execute(f'SELECT id FROM "{pg.schema}".orders ORDER BY id').fetchall()
    assert stored == [(44,)]


def test_a_job_through_the_inbox_keeps_its_headers_and_waits_from_its_commit(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with conn.transaction():
        pg.enqueue_in(conn, EnqueueParams(jobs=[replace(new_job(0), headers=headers)], now=2.0))
    (seen,) = pg.get_jobs(GetJobsParams(ids=["j0"]))  # still in the inbox
    assert (seen.headers, seen.ready_at) == (headers, 2.0)
    (lease,) = pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=7.0)).leases
    assert (lease.headers, lease.ready_at, lease.started_at) == (headers, 2.0, 7.0)


def test_a_sharded_job_in_the_callers_transaction_goes_to_one_of_its_shards(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """The choice reads the loads of jobs already taken in (a flood in imports@0), not those of
    jobs still in inboxes; the job then runs from the shard chosen."""
    flood = [new_job(n, "flood", queue="imports@0") for n in range(3)]
    pg.enqueue(EnqueueParams(jobs=flood, now=0.0))
    job = replace(new_job(9, "b", queue="imports@0"), shards=("imports@0", "imports@1"))
    with conn.transaction():
        assert pg.enqueue_in(conn, EnqueueParams(jobs=[job], now=0.0)) == ["imports@1"]
    leases = pg.dequeue(DequeueParams(queues=["imports@1"], worker_id="w", now=1.0)).leases
    assert [(lease.job_id, lease.queue) for lease in leases] == [("j9", "imports@1")]


def keyed(n: int) -> NewJob:
    return replace(new_job(n), unique=Unique(key="k", window=600.0))


def put(pg: DisposableBackend, n: int, now: float) -> dict[int, str]:
    return dict(pg.enqueue(EnqueueParams(jobs=[keyed(n)], now=now)).existing)


def test_a_unique_key_taken_in_the_callers_transaction(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """Rolled back, the key was never taken; committed, the job in the inbox holds it, and
    keeps it once taken in. An enqueue in the transaction gets the holder's id too."""
    with conn.transaction(force_rollback=True):
        pg.enqueue_in(conn, EnqueueParams(jobs=[keyed(0)], now=0.0))
    assert put(pg, 1, 0.0) == {}
    assert take_ids(pg) == ["j1"]
    pg.ack_many(AckManyParams(tokens=["j1:1"], now=1.0))
    with conn.transaction(), pg.bound_to(conn):
        assert put(pg, 2, 2.0) == {}
        assert put(pg, 3, 2.0) == {0: "j2"}
    assert put(pg, 4, 3.0) == {0: "j2"}  # waiting in the inbox
    assert take_ids(pg, now=4.0) == ["j2"]
    assert put(pg, 5, 5.0) == {0: "j2"}  # taken in, running


def test_a_job_cancelled_in_the_inbox_is_never_taken_in(
    pg: DisposableBackend, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """The inbox is taken in by whoever holds a tenant next (an enqueue of it, a dispatch,
    maintenance): a job a cancel took out of it reaches none of them."""
    with conn.transaction():
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(1), new_job(2)], now=0.0))
    assert pg.cancel(CancelParams(ids=["j1"], now=0.5)).outcomes == [CancelOutcome.CANCELLED]
    pg.enqueue(EnqueueParams(jobs=[new_job(3)], now=1.0))  # takes tenant a's inbox in
    pg.maintain(MaintainParams(now=1.0))
    assert take_ids(pg) == ["j2", "j3"]
    (seen,) = pg.get_jobs(GetJobsParams(ids=["j1"]))
    assert seen.state is JobState.CANCELLED
    (stats,) = pg.stats(StatsParams(queue="default", tenant="a"))
    assert (stats.ready, stats.running) == (0, 2)
