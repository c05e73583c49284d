"""arq's jobs and worker settings: the no-op (default max_jobs=10) and the flood's stamp."""

import asyncio
from typing import ClassVar

from _drive import URL, counter, mark_done
from _flood import JOB_SECONDS, record_start
from arq.connections import RedisSettings

_client = counter()


async def noop(ctx: dict, tenant: str) -> None:
    mark_done(_client)


async def stamp(ctx: dict, tenant: str, enqueued_at: float) -> None:
    record_start(_client, tenant, enqueued_at)
    await asyncio.sleep(JOB_SECONDS)


class WorkerSettings:
    functions: ClassVar[list[object]] = [noop]
    redis_settings = RedisSettings.from_dsn(URL)


class FloodSettings:
    """The flood benchmark: 4 jobs at once per process, like every system there."""

    functions: ClassVar[list[object]] = [stamp]
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = 4
