"""arq: ``enqueue_job`` one job per call (awaited in turn); two ``arq`` worker processes."""

import asyncio
import sys

from _drive import measure, report
from arq import create_pool
from arq_jobs import WorkerSettings


def enqueue(n: int) -> None:
    async def run() -> None:
        pool = await create_pool(WorkerSettings.redis_settings)
        for i in range(n):
            await pool.enqueue_job("noop", f"t{i % 10}")
        await pool.aclose()

    asyncio.run(run())


worker = [sys.executable, "-m", "arq", "arq_jobs.WorkerSettings"]
report(measure(int(sys.argv[1]), enqueue, [worker, worker]))
