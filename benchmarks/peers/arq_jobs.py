"""arq's no-op job and worker settings (default max_jobs=10)."""

from typing import ClassVar

from _drive import URL, counter, mark_done
from arq.connections import RedisSettings

_client = counter()


async def noop(ctx: dict, tenant: str) -> None:
    mark_done(_client)


class WorkerSettings:
    functions: ClassVar[list[object]] = [noop]
    redis_settings = RedisSettings.from_dsn(URL)
