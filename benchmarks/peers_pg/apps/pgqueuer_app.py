"""pgqueuer: the factory ``pgq run`` takes, with one no-op entrypoint."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import AsyncpgDriver, Job, PgQueuer


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ["BENCH_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        """Does nothing."""

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    # What `pgq run apps.pgqueuer_app:main --batch-size N` does; pgqueuer 1.6.0's CLI fails
    # while parsing its own --log-level default, so the benchmark calls the same supervisor.
    import asyncio
    import sys
    from datetime import timedelta

    import pgqueuer

    factory = "apps.pgqueuer_app:main"
    batch = int(sys.argv[1])
    asyncio.run(pgqueuer.run(factory, batch_size=batch, dequeue_timeout=timedelta(seconds=30)))
