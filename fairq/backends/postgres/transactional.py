"""Enqueue inside the application's own transaction: the job exists if, and only if, it commits.

Two ways in, one mechanism::

    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("INSERT INTO orders …")
        backend.enqueue_in(conn, EnqueueParams(jobs=[…], now=time.time()))

    with conn.transaction(), backend.bound_to(conn):
        send_receipt.enqueue(order_id, tenant=shop)   # any App call that enqueues

Each enqueue runs in a SAVEPOINT on the caller's connection, so a refused enqueue (a duplicate
id) raises DuplicateJob and rolls back only itself: the caller's transaction stays usable.
It inserts into the ``inbox`` table and nothing else — no queue lock, no tenant row — because
those locks would be held until the caller commits and stall every worker of the queue. A job
with throttle rules records its enqueue in its window first and goes to the queue the rules
chose (throttling.py), in the same savepoint: a rolled-back enqueue is not counted. The
next dequeue of the queue (or ``maintain``) takes committed inbox rows in, in enqueue order, and
a NOTIFY sent with the insert (delivered only on commit) wakes an idle worker at once.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import Connection, Cursor
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from fairq.backends._sql import Queries
from fairq.backends.postgres import sharding, throttling, unique
from fairq.backends.postgres.db import invalid_text
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.steps import run
from fairq.contract import EnqueueResult
from fairq.errors import DuplicateJob
from fairq.job import NewJob, decode_headers, encode_headers
from fairq.policy.unique import answer

log = logging.getLogger("fairq.backends.postgres")

# backend object id -> the caller's connection its enqueues go to, in this context
_bound: contextvars.ContextVar[dict[int, Connection[Any]] | None] = contextvars.ContextVar(
    "fairq_postgres_bound", default=None
)


@contextmanager
def binding(backend: object, conn: Connection[Any]) -> Iterator[None]:
    """Route ``backend``'s enqueues to ``conn`` for the duration of the block (this context)."""
    token = _bound.set({**(_bound.get() or {}), id(backend): conn})
    try:
        yield
    finally:
        _bound.reset(token)


def bound_connection(backend: object) -> Connection[Any] | None:
    return (_bound.get() or {}).get(id(backend))


class InboxWriter:
    """Writes enqueues into the inbox on a caller's connection, and takes them in later."""

    def __init__(self, q: Queries, channel: Callable[[str], str]) -> None:
        self.q = q
        self.channel = channel

    def write(self, conn: Connection[Any], given: Sequence[NewJob], now: float) -> EnqueueResult:
        """Insert the jobs into the inbox, but those whose unique key is held (unique.py: the
        key's row stays locked until the caller's transaction ends, so another enqueue of the
        key waits for it, as for a throttle window); returns the queue each went to."""
        _join_callers_transaction(conn)
        try:
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                routed = run(cur, throttling.route(self.q, given, now))
                # The loads do not count jobs still in inboxes: a batch of one tenant's
                # sharded jobs written here goes to one shard, not spread over its shards.
                placed = [run(cur, sharding.place(self.q, job)) for job in routed]
                held = unique.claim(cur, self.q, given, [job.queue for job in placed], now)
                jobs = [job for i, job in enumerate(placed) if i not in held]
                for job in jobs:
                    if (
                        cur.execute(self.q["inbox_insert"], _inbox_args(job, now)).fetchone()
                        is None
                    ):
                        raise DuplicateJob(
                            f"job id {job.id!r} is already stored; nothing of the batch was "
                            "stored (your transaction is still usable)"
                        )
                for queue in sorted({job.queue for job in jobs}):
                    cur.execute(self.q["notify"], {"channel": self.channel(queue)})
            queues, existing = answer(len(placed), held, [job.queue for job in jobs])
            return EnqueueResult(queues=queues, existing=existing)
        except psycopg.DataError as exc:
            raise invalid_text(exc) from None
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateJob(
                f"a job id is already waiting to be taken in ({exc.diag.message_detail}); "
                "nothing of the batch was stored (your transaction is still usable)"
            ) from None

    def take_in(self, cur: Cursor[Row], events: Events, queue: str, now: float) -> int:
        """Move one queue's committed inbox rows into jobs; the caller holds its exclusive lock."""
        rows = cur.execute(self.q["inbox_take"], {"queue": queue}).fetchall()
        if not rows:
            return 0
        cur.execute(self.q["queue_ensure"], {"name": queue})
        tenants = events.lock_tenants([(row["queue"], row["tenant"]) for row in rows])
        jobs = [_new_job(row) for row in rows]
        taken = [
            (job, tenants[(job.queue, job.tenant)], row["enqueued_at"], row["seq"])
            for job, row in zip(jobs, rows, strict=True)
        ]
        dropped = events.insert_taken(taken, now)
        for job in dropped:
            log.warning(
                "dropped job %r from the inbox of queue %r: a job with the same id is already "
                "stored (queued, running, dead or succeeded)",
                job.id,
                queue,
            )
        for tenant in tenants.values():
            events.save(None, tenant)
        return len(rows) - len(dropped)


def _join_callers_transaction(conn: Connection[Any]) -> None:
    """Outside autocommit, an idle connection's ``conn.transaction()`` would start a
    transaction of its own and commit it at the end of the block: an enqueue that is the first
    statement of ``with psycopg.connect(url) as conn, backend.bound_to(conn):`` would survive
    the rollback of everything after it. So the caller's transaction is opened first, as its
    own next statement would open it, and the enqueue becomes a savepoint inside it."""
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        conn.execute("SELECT 1")


def _inbox_args(job: NewJob, now: float) -> dict[str, object]:
    return {
        "id": job.id,
        "queue": job.queue,
        "tenant": job.tenant,
        "name": job.name,
        "payload": job.payload,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "lease_timeout": job.lease_timeout,
        "cost": job.cost,
        "enqueued_at": now,
        "run_at": job.run_at,
        "headers": encode_headers(job.headers),
    }


def _new_job(row: Row) -> NewJob:
    return NewJob(
        id=row["id"],
        name=row["name"],
        queue=row["queue"],
        tenant=row["tenant"],
        payload=row["payload"],
        priority=row["priority"],
        run_at=row["run_at"],
        max_attempts=row["max_attempts"],
        lease_timeout=row["lease_timeout"],
        cost=row["cost"],
        headers=decode_headers(row["headers"]),
    )
