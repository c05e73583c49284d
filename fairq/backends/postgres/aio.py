"""``AsyncPostgresStore``: the PostgreSQL store's asyncio face (fairq/backends/aio.py).

Enqueue, set_tenant, job_types, get_jobs and stats run the very operations of
``PostgresBackend`` (producing.py, its ``set_tenant_steps``, inspect.py's ``*_steps``;
fairq.backends.postgres.steps) in one transaction
on a connection of psycopg's ``AsyncConnectionPool``; this module is their transport: the
pool, the transaction, reconnecting, and the same errors as db.py. A statement that waits (on
a lock another transaction holds) waits in the event loop, which serves other tasks meanwhile.
The other calls (set_queue, figures, dead, requeue) go through a thread (``Offloaded``): their
rules run in Python over rows, through steps not written yet.

An enqueue inside ``PostgresBackend.bound_to(conn)`` is refused: the bound connection is a
blocking one, which an async call cannot use without blocking the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ClassVar, TypeVar

from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool

from fairq.backends.aio import Offloaded
from fairq.backends.postgres import inspect
from fairq.backends.postgres.backend import PostgresBackend
from fairq.backends.postgres.db import Reconnect, Retry, attempt, pool_options
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.steps import PgSteps, arun
from fairq.backends.postgres.transactional import bound_connection
from fairq.backends.postgres.url import PostgresUrl
from fairq.contract import (
    EnqueueParams,
    EnqueueResult,
    GetJobsParams,
    JobType,
    StatsParams,
    TenantSettingsParams,
    TenantStats,
)
from fairq.errors import ConfigError
from fairq.job import JobInfo, check_distinct
from fairq.policy.unique import answer

T = TypeVar("T")
AsyncPool = AsyncConnectionPool[AsyncConnection[Row]]


class AsyncDatabase:
    """``Database`` (db.py) over asyncio: each ``run`` one transaction, run again on a fresh
    connection when the connection was lost before commit (for up to ``reconnect_wait`` s)."""

    def __init__(self, url: PostgresUrl, *, reconnect_wait: float = 30.0) -> None:
        self.url = url
        self.reconnect_wait = reconnect_wait
        self.pool: AsyncPool = AsyncConnectionPool(
            connection_class=AsyncConnection[Row], **pool_options(url, "fairq-aio")
        )

    async def open(self) -> None:
        await self.pool.open(wait=False)

    async def run(
        self, work: Callable[[AsyncCursor[Row]], Awaitable[T]], *, explicit: bool = True
    ) -> T:
        """``Database.run`` (db.py) over asyncio: the same tries, errors and reconnects."""
        reconnect = Reconnect(self.url, self.reconnect_wait)
        while True:
            try:
                return await self._attempt(work, explicit)
            except Retry as retry:
                pause = reconnect.pause(retry)
                await self.pool.check()
                await asyncio.sleep(pause)

    async def _attempt(self, work: Callable[[AsyncCursor[Row]], Awaitable[T]], explicit: bool) -> T:
        with attempt(self.url) as this:
            async with self.pool.connection(timeout=self.reconnect_wait) as conn:
                if not explicit:
                    async with conn.cursor() as cur:
                        return await work(cur)
                async with conn.transaction():
                    async with conn.cursor() as cur:
                        result = await work(cur)
                    this.committing = True
                return result

    async def close(self) -> None:
        await self.pool.close()


class AsyncPostgresStore(Offloaded):
    """The asyncio face of ``sync`` (same URL and schema, a pool of its own)."""

    native: ClassVar[frozenset[str]] = frozenset(
        {"enqueue", "set_tenant", "job_types", "get_jobs", "stats"}
    )

    def __init__(self, sync: PostgresBackend) -> None:
        super().__init__(sync)
        self.pg = sync
        self.db = AsyncDatabase(sync.url)

    async def open(self) -> None:
        await self.db.open()

    async def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        jobs = list(params.jobs)
        check_distinct(jobs)
        if not jobs:
            return EnqueueResult(queues=[])
        if bound_connection(self.pg) is not None:
            raise ConfigError(
                "an async enqueue cannot join the transaction of the connection bound with "
                "bound_to(conn), a blocking one; call the blocking enqueue inside the block"
            )
        queues, held = await self.pg.enqueueing.awaited(self.db, jobs, params.now)
        chosen, existing = answer(len(jobs), held, queues)
        return EnqueueResult(queues=chosen, existing=existing)

    async def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return await self._run(lambda: self.pg.set_tenant_steps(params))

    async def job_types(self) -> dict[str, JobType]:
        return await self._run(lambda: inspect.job_types_steps(self.pg.q))

    async def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return await self._run(lambda: inspect.get_jobs_steps(self.pg.q, params.ids))

    async def stats(self, params: StatsParams) -> list[TenantStats]:
        return await self._run(lambda: inspect.stats_steps(self.pg.q, params))

    async def aclose(self) -> None:
        await self.db.close()
        await super().aclose()

    def _run(self, make: Callable[[], PgSteps[T]]) -> Awaitable[T]:
        """The operation ``make`` makes, in one transaction; made anew for each attempt (a
        transaction run again after a lost connection starts from its first statement)."""
        return self.db.run(lambda cur: arun(cur, make()))
