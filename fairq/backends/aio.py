"""The asyncio face of a store: the producer's and admin's calls of ``Backend``, awaitable.

An ``AsyncStore`` answers the calls an async web app makes (enqueue, the job types it needs
to enqueue by name, settings, inspection) with the very params and results of the Backend
contract (fairq/contract/): it is the same contract, awaited. Each store is built over the
App's blocking store of the same URL:

* ``Offloaded`` runs each call of the blocking store in one thread of its own, so the event
  loop never waits on it. It is the whole of the SQLite store's async face (one thread: one
  connection, SQLite's one writer), and the fallback of the server stores for the calls they
  do not (yet) perform natively; ``inline=True`` calls it in the loop instead, for the
  reference model, which does no I/O.
* ``AsyncRedisStore`` (backends/redis/aio.py) and ``AsyncPostgresStore``
  (backends/postgres/aio.py) perform their native calls over ``redis.asyncio`` and psycopg's
  ``AsyncConnectionPool``, running the same operations as the blocking store
  (fairq.backends.steps): only the transport differs. ``native`` names those calls.

``open_async_store`` picks the face of a blocking store.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar, Protocol, TypeVar

from fairq.cancel import CancelParams, CancelResult
from fairq.contract import (
    Backend,
    EnqueueParams,
    EnqueueResult,
    FiguresParams,
    GetJobsParams,
    JobType,
    ListDeadParams,
    RequeueParams,
    SetQueueParams,
    StatsParams,
    TenantFigures,
    TenantSettingsParams,
    TenantStats,
)
from fairq.job import JobInfo

P = TypeVar("P")
R = TypeVar("R")


class AsyncStore(Protocol):
    """The Backend calls an async producer or admin makes, each awaitable (same params and
    results, same errors). ``open`` before the first call, ``aclose`` after the last, in the
    event loop of the calls: a native store's connections belong to that loop."""

    #: The calls performed without a thread (the others go through one).
    native: ClassVar[frozenset[str]]

    async def open(self) -> None: ...

    async def enqueue(self, params: EnqueueParams) -> EnqueueResult: ...

    async def job_types(self) -> dict[str, JobType]: ...

    async def set_tenant(self, params: TenantSettingsParams) -> TenantStats: ...

    async def set_queue(self, params: SetQueueParams) -> None: ...

    async def stats(self, params: StatsParams) -> list[TenantStats]: ...

    async def figures(self, params: FiguresParams) -> list[TenantFigures]: ...

    async def get_jobs(self, params: GetJobsParams) -> list[JobInfo]: ...

    async def list_dead(self, params: ListDeadParams) -> list[JobInfo]: ...

    async def requeue(self, params: RequeueParams) -> int: ...

    async def cancel(self, params: CancelParams) -> CancelResult: ...

    async def aclose(self) -> None: ...


class Offloaded:
    """A blocking store's calls run in a thread of their own (or inline: ``inline=True``).

    One thread, so calls run one at a time in the order made: a SQLite store keeps one
    connection and one writer however many coroutines enqueue at once."""

    native: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, sync: Backend, *, inline: bool = False) -> None:
        self.sync = sync
        self._executor = (
            None if inline else ThreadPoolExecutor(max_workers=1, thread_name_prefix="fairq-aio")
        )

    async def _offload(self, call: Callable[[P], R], params: P) -> R:
        if self._executor is None:
            return call(params)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, call, params)

    async def open(self) -> None:
        pass

    async def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        return await self._offload(self.sync.enqueue, params)

    async def job_types(self) -> dict[str, JobType]:
        return await self._offload(lambda _: self.sync.job_types(), None)

    async def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return await self._offload(self.sync.set_tenant, params)

    async def set_queue(self, params: SetQueueParams) -> None:
        await self._offload(self.sync.set_queue, params)

    async def stats(self, params: StatsParams) -> list[TenantStats]:
        return await self._offload(self.sync.stats, params)

    async def figures(self, params: FiguresParams) -> list[TenantFigures]:
        return await self._offload(self.sync.figures, params)

    async def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return await self._offload(self.sync.get_jobs, params)

    async def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        return await self._offload(self.sync.list_dead, params)

    async def requeue(self, params: RequeueParams) -> int:
        return await self._offload(self.sync.requeue, params)

    async def cancel(self, params: CancelParams) -> CancelResult:
        return await self._offload(self.sync.cancel, params)

    async def aclose(self) -> None:
        """Stop the thread (the blocking store stays open: it is the App's)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)


def open_async_store(sync: Backend) -> AsyncStore:
    """The async face of ``sync`` (not opened yet: ``await store.open()``). A server store's
    package is looked at only when loaded (a store of it exists only then), so picking a face
    never imports an optional extra."""
    from fairq.model import ReferenceModel

    if isinstance(sync, ReferenceModel):
        return Offloaded(sync, inline=True)
    if "fairq.backends.redis" in sys.modules:
        from fairq.backends.redis import RedisBackend

        if isinstance(sync, RedisBackend):
            if sync.options.cluster or sync.options.wait_replicas:
                return Offloaded(sync)  # a Cluster's steps block (redis/steps.py: Blocking)
            from fairq.backends.redis.aio import AsyncRedisStore

            return AsyncRedisStore(sync)
    if "fairq.backends.postgres" in sys.modules:
        from fairq.backends.postgres import PostgresBackend

        if isinstance(sync, PostgresBackend):
            from fairq.backends.postgres.aio import AsyncPostgresStore

            return AsyncPostgresStore(sync)
    return Offloaded(sync)
