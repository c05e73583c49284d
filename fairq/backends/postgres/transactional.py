"""Enqueue inside the application's own transaction: the job exists if, and only if, it commits.

Two ways in, one mechanism::

    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("INSERT INTO orders …")
        backend.enqueue_in(conn, EnqueueParams(jobs=[…], now=time.time()))

    with conn.transaction(), backend.bound_to(conn):
        send_receipt.enqueue(order_id, tenant=shop)   # any App call that enqueues

Each enqueue runs in a SAVEPOINT on the caller's connection, so a refused enqueue (a duplicate
id) raises DuplicateJob and rolls back only itself: the caller's transaction stays usable.
It is the enqueue every caller runs (producing.py, functions/enqueue.sql), told to put every
job into the ``inbox`` table and touch nothing else — no queue lock, no tenant row — because
those locks would be held until the caller commits and stall every worker of the queue. A job
with throttle rules records its enqueue in its window first and goes to the queue the rules
chose (throttling.py), and a job with a unique key claims it (unique.py: the key's row stays locked
until the caller's transaction ends, so another enqueue of the key waits for it, as for a
throttle window), in the same savepoint: a rolled-back enqueue is not counted. The next
dispatch of the queue (or ``maintain``, or an enqueue of the same tenant) takes committed inbox
rows in, in enqueue order, and a NOTIFY sent with the insert (delivered only on commit) wakes
an idle worker at once.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from fairq.backends._sql import Queries
from fairq.backends.postgres import producing
from fairq.backends.postgres.db import invalid_text
from fairq.backends.postgres.steps import run
from fairq.contract import EnqueueResult
from fairq.job import NewJob
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
    """Writes enqueues into the inbox on a caller's connection (taken in later by whoever
    holds each tenant next: functions/enqueue.sql)."""

    def __init__(self, q: Queries, enqueueing: producing.Enqueue) -> None:
        self.q = q
        self.enqueueing = enqueueing

    def write(self, conn: Connection[Any], given: Sequence[NewJob], now: float) -> EnqueueResult:
        """Insert the jobs into the inbox, but those whose unique key is held (unique.py: the
        key's row stays locked until the caller's transaction ends, so another enqueue of the
        key waits for it, as for a throttle window); returns the queue each went to."""
        _join_callers_transaction(conn)
        try:
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                queues, held = run(cur, self.enqueueing.steps(given, now, inbox=True))
            chosen, existing = answer(len(given), held, queues)
            return EnqueueResult(queues=chosen, existing=existing)
        except psycopg.DataError as exc:
            raise invalid_text(exc) from None
        except psycopg.errors.UniqueViolation as exc:
            raise producing.refused(exc, usable=True) from None


def _join_callers_transaction(conn: Connection[Any]) -> None:
    """Outside autocommit, an idle connection's ``conn.transaction()`` would start a
    transaction of its own and commit it at the end of the block: an enqueue that is the first
    statement of ``with psycopg.connect(url) as conn, backend.bound_to(conn):`` would survive
    the rollback of everything after it. So the caller's transaction is opened first, as its
    own next statement would open it, and the enqueue becomes a savepoint inside it."""
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        conn.execute("SELECT 1")
