"""What the async API gives a web app: enqueues per second, blocking and awaited, in one run.

For each store, the same App enqueues N single jobs (over 10 tenants) three ways, the ways
alternating round by round so all see the same machine load: blocking ``job.enqueue`` one
after another; ``await job.aenqueue`` one after another (the async store's own cost, per
call); and ``await job.aenqueue`` with ``--concurrency`` calls in flight at once (what an event
loop serving many requests gets: the loop never waits on the store). Printed: jobs/s of each,
and the ratios to the blocking enqueue, the median over rounds.

    FAIRQ_BENCH_REDIS_URL=redis://127.0.0.1:6379/13 .venv/bin/python benchmarks/async_enqueue.py
    .venv/bin/python benchmarks/async_enqueue.py --stores postgres --jobs 3000 --rounds 5

Redis gets a fresh key prefix and PostgreSQL a fresh schema (both removed after); SQLite a
temporary file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from fairq import App

REDIS = os.environ.get("FAIRQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
POSTGRES = os.environ.get("FAIRQ_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@contextlib.contextmanager
def store(kind: str) -> Iterator[str]:
    if kind == "redis":
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        yield f"{REDIS}?prefix={prefix}"
        import redis

        client = redis.Redis.from_url(REDIS)
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
    elif kind == "postgres":
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        yield f"{POSTGRES}?schema={schema}"
        import psycopg

        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"


def noop(account: str, n: int) -> None:
    """The benchmark's job (never run here)."""


def measure(app: App, jobs: int, concurrency: int) -> dict[str, float]:
    """Seconds for ``jobs`` enqueues, each way."""
    job = app.jobs["bench.noop"]
    took: dict[str, float] = {}
    started = time.perf_counter()
    for n in range(jobs):
        job.enqueue(f"t{n % 10}", n)
    took["blocking"] = time.perf_counter() - started

    async def awaited() -> None:
        begun = time.perf_counter()
        for n in range(jobs):
            await job.aenqueue(f"t{n % 10}", n)
        took["awaited"] = time.perf_counter() - begun
        gate = asyncio.Semaphore(concurrency)

        async def one(n: int) -> None:
            async with gate:
                await job.aenqueue(f"t{n % 10}", n)

        begun = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(jobs)))
        took["concurrent"] = time.perf_counter() - begun
        await app.aclose(blocking=False)

    asyncio.run(awaited())
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="redis,postgres,sqlite")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    print(f"{args.jobs} enqueues per way and round, {args.rounds} rounds, "
          f"{args.concurrency} in flight for 'concurrent'")  # fmt: skip
    for kind in args.stores.split(","):
        rates: dict[str, list[float]] = {}
        with store(kind) as url:
            app = App(url)
            app.job(noop, tenant="account", name="bench.noop")
            for _ in range(args.rounds):
                for way, seconds in measure(app, args.jobs, args.concurrency).items():
                    rates.setdefault(way, []).append(args.jobs / seconds)
            app.close()
        medians = {way: statistics.median(found) for way, found in rates.items()}
        line = ", ".join(
            f"{way} {rate:,.0f}/s ({rate / medians['blocking']:.2f}x)"
            for way, rate in medians.items()
        )
        print(f"{kind:9} {line}")


if __name__ == "__main__":
    main()
