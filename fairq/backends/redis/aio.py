"""``AsyncRedisStore``: the Redis store's asyncio face (fairq/backends/aio.py).

Enqueue, set_tenant, set_queue, job_types, get_jobs and stats run the very operations of
``RedisBackend`` (its ``*_steps`` and inspect.py, fairq.backends.steps) over a ``redis.asyncio``
client; this module is their transport and nothing else. The client retries a lost
connection as the blocking one does (db.py), and a call that must not run twice is
sent with a reply key of its own (``register_once`` in _lib.lua): each call in flight holds
one caller id, taken from a free list, so two coroutines never share one and the keys stay as
few as the calls ever in flight at once. The other calls go through a thread (``Offloaded``).

A single Redis only: on a Redis Cluster (or with ``wait_replicas``) an enqueue's steps include
blocking work across slots (steps.py: ``Blocking``), so ``open_async_store`` gives such a
store ``Offloaded`` itself, every call in its thread.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, ClassVar, TypeVar

import redis.asyncio
from redis.asyncio.retry import Retry

from fairq.backends.aio import Offloaded
from fairq.backends.steps import adrive
from fairq.contract import (
    EnqueueParams,
    EnqueueResult,
    GetJobsParams,
    JobType,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
    TenantStats,
)
from fairq.errors import ConfigError
from fairq.job import JobInfo

from . import inspect
from .backend import RedisBackend
from .db import RETRIES, backoff, client_settings, translated
from .scripts import library
from .steps import Batch, Blocking, RedisSteps, Request, once_args

T = TypeVar("T")


class AsyncRedisStore(Offloaded):
    """The asyncio face of ``sync`` (same URL, same prefix, a client of its own)."""

    native: ClassVar[frozenset[str]] = frozenset(
        {"enqueue", "set_tenant", "set_queue", "job_types", "get_jobs", "stats"}
    )

    def __init__(self, sync: RedisBackend) -> None:
        if sync.options.cluster or sync.options.wait_replicas:
            raise ConfigError(
                "AsyncRedisStore speaks to a single Redis without wait_replicas; for a Redis "
                "Cluster or wait_replicas use open_async_store, which runs the blocking store's "
                "calls in a thread (fairq/backends/aio.py)"
            )
        super().__init__(sync)
        self.redis = sync
        self.client: Any = redis.asyncio.Redis.from_url(
            sync.options.client_url, retry=Retry(backoff(), RETRIES), **client_settings()
        )
        self._library = library()
        self._free: list[str] = []  # caller ids not in use (reply keys: module docstring)
        self._made = itertools.count()

    async def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        return await self._drive(self.redis.enqueue_steps(params))

    async def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return await self._drive(self.redis.set_tenant_steps(params))

    async def set_queue(self, params: SetQueueParams) -> None:
        await self._drive(self.redis.set_queue_steps(params))

    async def job_types(self) -> dict[str, JobType]:
        return await self._drive(inspect.job_types(self.redis.layout))

    async def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return await self._drive(self.redis.get_jobs_steps(params))

    async def stats(self, params: StatsParams) -> list[TenantStats]:
        return await self._drive(inspect.stats(self.redis.layout, params))

    async def aclose(self) -> None:
        await self.client.aclose()
        await super().aclose()

    async def _drive(self, steps: RedisSteps[T]) -> T:
        return await adrive(steps, self._perform)

    async def _perform(self, request: Request) -> Any:
        assert not isinstance(request, Blocking), "a single Redis's steps never block"
        with translated(self.redis.options.safe_url):
            if isinstance(request, Batch):
                pipe = self.client.pipeline(transaction=request.transaction)
                request.fill(pipe)
                return await pipe.execute()
            if request.once is None:
                return await self._library.acall(
                    self.client, request.op, request.keys, request.args
                )
            caller = self._free.pop() if self._free else f"{self.redis.caller}-a{next(self._made)}"
            try:
                call_id = os.urandom(8).hex()
                keys, args = once_args(self.redis.layout, request.once, caller, call_id, request)
                return await self._library.acall(self.client, request.op, keys, args)
            finally:
                self._free.append(caller)
