"""arq under the flood: two ``arq`` worker processes with max_jobs=4 (8 jobs at once)."""

import asyncio
import sys

from _flood import arguments, flood, report
from arq import create_pool
from arq_jobs import FloodSettings

loop = asyncio.new_event_loop()
pool = loop.run_until_complete(create_pool(FloodSettings.redis_settings))


def send(tenant: str, at: float) -> None:
    loop.run_until_complete(pool.enqueue_job("stamp", tenant, at))


worker = [sys.executable, "-m", "arq", "arq_jobs.FloodSettings"]
report(flood(send, [worker, worker], arguments()))
