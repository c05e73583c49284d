"""``enqueue`` as one operation (fairq.backends.postgres.steps), for the blocking store, the
asyncio one and an enqueue in the caller's transaction alike: the statements of one
transaction, in order, and what their rows mean.

The jobs are stored by one statement, ``queries["enqueue"]`` (functions/enqueue.sql says what
it does: a job is stored when its tenant is free and waits in the inbox when another
transaction holds it; ``inbox``: every job into the inbox, for an enqueue in the caller's
transaction, which takes no fairq lock). Before it, in the same transaction, only what some
jobs need: throttle rules (their windows' rows locked: throttling.py), unique keys claimed (a
job whose key is held is not stored: unique.py; the key rows are locked before the queue locks
the statement takes, an order every enqueue keeps). Sharded jobs go one after another, so each
one's choice of shard sees those before it (sharding.py); the batch is still one transaction.
A plain batch is the one statement, in one round trip.

A refused id comes back as ``UniqueViolation``: ``refused_after`` turns it into
``DuplicateJob``, or, on a try after a lost connection, StoreUnavailable (the lost try may have
stored the job). ``blocking`` and ``awaited`` run the operation on the two stores alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import AsyncCursor, Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres import locks, sharding, throttling, unique
from fairq.backends.postgres.db import Database
from fairq.backends.postgres.keys import channel_salt, schema_seed
from fairq.backends.postgres.records import Row, tenant_key
from fairq.backends.postgres.steps import PgSteps, Sql, arun, run
from fairq.backends.postgres.url import PostgresUrl
from fairq.errors import DuplicateJob, StoreUnavailable
from fairq.job import NewJob, encode_headers
from fairq.policy.unique import Holder

if TYPE_CHECKING:
    from fairq.backends.postgres.aio import AsyncDatabase


class Enqueue:
    """The enqueue of one store (schema): its queries, lock seed and wake-up channels' salt."""

    def __init__(self, q: Queries, schema: str) -> None:
        self.q = q
        self.schema = schema

    @staticmethod
    def one_statement(jobs: Sequence[NewJob]) -> bool:
        """Whether ``steps`` is the one statement (no throttle rules, shards, unique keys): it
        may then run outside an explicit transaction."""
        return not any(job.throttle or job.shards or job.unique for job in jobs)

    def blocking(
        self, db: Database, jobs: Sequence[NewJob], now: float
    ) -> tuple[list[str], dict[int, Holder]]:
        """``steps`` on the blocking store; a plain batch (``one_statement``) in its own
        implicit transaction, one round trip (``refused_after`` says what a refused id
        means)."""
        tries = 0

        def once(cur: Cursor[Row]) -> tuple[list[str], dict[int, Holder]]:
            nonlocal tries
            tries += 1
            try:
                return run(cur, self.steps(jobs, now))
            except psycopg.errors.UniqueViolation as exc:
                raise refused_after(exc, tries, db.url) from None

        return db.run(once, explicit=not self.one_statement(jobs))

    async def awaited(
        self, db: AsyncDatabase, jobs: Sequence[NewJob], now: float
    ) -> tuple[list[str], dict[int, Holder]]:
        """``blocking`` on the asyncio store (aio.py): the same transactions and errors."""
        tries = 0

        async def once(cur: AsyncCursor[Row]) -> tuple[list[str], dict[int, Holder]]:
            nonlocal tries
            tries += 1
            try:
                return await arun(cur, self.steps(jobs, now))
            except psycopg.errors.UniqueViolation as exc:
                raise refused_after(exc, tries, db.url) from None

        return await db.run(once, explicit=not self.one_statement(jobs))

    def steps(
        self, jobs: Sequence[NewJob], now: float, *, inbox: bool = False
    ) -> PgSteps[tuple[list[str], dict[int, Holder]]]:
        """Store ``jobs`` (checked: non-empty, distinct ids): the queues of the jobs stored,
        and the jobs whose unique key is held, by position (unique.py)."""
        if not any(job.shards for job in jobs):
            return (yield from self._store(list(jobs), now, inbox=inbox))
        queues: list[str] = []
        held: dict[int, Holder] = {}
        for i, job in enumerate(jobs):
            placed = yield from sharding.place(self.q, job)
            went, found = yield from self._store([placed], now, given=[job], inbox=inbox)
            queues += went
            if found:
                held[i] = found[0]
        return queues, held

    def _store(
        self, jobs: list[NewJob], now: float, given: list[NewJob] | None = None, *, inbox: bool
    ) -> PgSteps[tuple[list[str], dict[int, Holder]]]:
        """``given``: the jobs as enqueued, when ``jobs`` are their copies placed in a shard
        (a unique key's scope is the queue named at enqueue)."""
        q = self.q
        if any(job.throttle for job in jobs):  # the windows record the event's time
            now = yield from locks.event_time(q, now)
        jobs = yield from throttling.route(q, jobs, now)
        held = yield from unique.claim_steps(q, given or jobs, [job.queue for job in jobs], now)
        if held:
            jobs = [job for i, job in enumerate(jobs) if i not in held]
            if not jobs:
                return [], held
        rows = yield Sql(q["enqueue"], arguments(jobs, now, schema=self.schema, inbox=inbox))
        return queues_of(rows), held


def arguments(
    jobs: Sequence[NewJob], now: float, *, schema: str, inbox: bool = False
) -> dict[str, Any]:
    """The statement's arguments: the jobs as one JSON array of objects with the inbox's
    columns, in order (one text to send, whatever the batch: twelve typed arrays cost the
    client more than the server's work), each tenant's key as bytea text. ``inbox``: put every
    job in the inbox (an enqueue inside the caller's transaction, which takes no lock)."""
    rows = [
        {
            "id": job.id,
            "name": job.name,
            "queue": job.queue,
            "tenant": job.tenant,
            "tenant_key": "\\x" + tenant_key(job.tenant).hex(),
            "payload": job.payload,
            "priority": job.priority,
            "run_at": float(job.run_at),
            "max_attempts": job.max_attempts,
            "lease_timeout": float(job.lease_timeout),
            "cost": float(job.cost),
            "learn_cost": job.learn_cost,
            "headers": encode_headers(job.headers),
        }
        for job in jobs
    ]
    return {
        "jobs": json.dumps(rows, separators=(",", ":")),
        "now": float(now),
        "seed": schema_seed(schema),
        "salt": channel_salt(schema),
        "inbox": inbox,
    }


def queues_of(rows: Sequence[Row]) -> list[str]:
    """The statement's reply: the queue each job went to, in order."""
    (row,) = rows
    return list(row["queues"])


def refused_after(
    exc: psycopg.errors.UniqueViolation, tries: int, url: PostgresUrl
) -> DuplicateJob | StoreUnavailable:
    """An id refused on the first try is a duplicate; on a later one (the connection was lost
    and the enqueue run again) it may be the lost try's own job: that is said instead."""
    if tries == 1:
        return refused(exc)
    return StoreUnavailable(
        f"the connection to {url.display} was lost during an enqueue and its ids are taken "
        f"now: the lost attempt may have stored the jobs ({exc.diag.message_detail})"
    )


def refused(exc: psycopg.errors.UniqueViolation, *, usable: bool = False) -> DuplicateJob:
    """The error of an enqueue whose id is already stored; nothing of the batch was stored.
    ``usable``: the enqueue ran in the caller's transaction, which it left usable."""
    detail = exc.diag.message_detail or str(exc).strip()
    tail = " (your transaction is still usable)" if usable else ""
    return DuplicateJob(
        f"a job id is already stored ({detail}); nothing of the batch was stored{tail}. Give "
        "each job its own id, or leave the id out to get a new one."
    )
