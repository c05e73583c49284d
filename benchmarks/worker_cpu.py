"""CPU time a worker process spends per job: what the worker costs, whatever the machine's load.

N no-op jobs (over 10 tenants) are enqueued, then one ``fairq worker --burst`` process drains
them; its user+system CPU seconds come from ``os.wait4`` (the child's rusage). A run with no job
at all measures start-up and shut-down, which is subtracted. CPU time barely depends on other
processes sharing the cores, unlike jobs/s. On SQLite the figure includes the store's own work
(it runs inside the worker); on Redis and PostgreSQL only the client side.

    .venv/bin/python benchmarks/worker_cpu.py --store sqlite --jobs 20000
    .venv/bin/python benchmarks/worker_cpu.py --store sqlite --job async  # an `async def` no-op
    FAIRQ_BENCH_REDIS_URL=redis://127.0.0.1:6379/4 \\
        .venv/bin/python benchmarks/worker_cpu.py --store redis
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fairq.app import Call, Options
from fairq.demo.jobs import NOOP, NOOP_ASYNC, make_app
from fairq.worker.worker import DEFAULT_CONCURRENCY

QUEUE = "bench"
TENANTS = 10
BATCH = 1000
REDIS_URL = (
    os.environ.get("FAIRQ_BENCH_REDIS_URL")
    or os.environ.get("BENCH_REDIS_URL")  # its old name, read until the next release
    or "redis://127.0.0.1:6379/13"
)
POSTGRES_URL = (
    os.environ.get("FAIRQ_BENCH_POSTGRES_URL")
    or os.environ.get("BENCH_POSTGRES_URL")  # its old name, read until the next release
    or "postgresql://postgres@127.0.0.1/perf_worker"
)


def store_url(store: str, work_dir: Path) -> str:
    if store == "sqlite":
        return f"sqlite:///{work_dir / 'bench.db'}"
    if store == "redis":
        return f"{REDIS_URL}?prefix=cpubench"
    return POSTGRES_URL


def reset(store: str, url: str) -> None:
    """Start from an empty store (Redis: the whole benchmark database; PostgreSQL: fairq's
    tables)."""
    if store == "redis":
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    elif store == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("drop schema if exists fairq cascade")


def enqueue(url: str, jobs: int, name: str = NOOP) -> None:
    app = make_app(url)
    try:
        for start in range(0, jobs, BATCH):
            app.enqueue_many(
                Call(name, (), {}, Options(tenant=f"tenant-{i % TENANTS}", queue=QUEUE))
                for i in range(start, min(jobs, start + BATCH))
            )
    finally:
        app.close()


def worker_cpu(url: str, concurrency: int, log_level: str, extra: list[str], cwd: Path) -> float:
    """CPU seconds (user + system) of one burst worker process, start to exit. It runs in
    ``cwd``, not here: ``python -m`` puts its working folder first on ``sys.path``, ahead of a
    ``PYTHONPATH`` that picks the checkout to measure."""
    command = [
        sys.executable, "-m", "fairq", "--log-level", log_level,
        "worker", "fairq.demo.jobs:app", "--url", url, "--queues", QUEUE,
        "--concurrency", str(concurrency), "--burst", *extra,
    ]  # fmt: skip
    out = subprocess.DEVNULL
    proc = subprocess.Popen(command, stdin=out, stdout=out, stderr=out, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"the worker exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def run_once(
    store: str, jobs: int, name: str, concurrency: int, log_level: str, extra: list[str]
) -> float:
    """Microseconds of worker CPU per job, start-up and shut-down subtracted."""
    work_dir = Path(tempfile.mkdtemp(prefix="fairq-cpu-"))
    try:
        url = store_url(store, work_dir)
        reset(store, url)
        enqueue(url, 1)  # creates the store; the empty run then measures start-up alone
        base = worker_cpu(url, concurrency, log_level, extra, work_dir)
        enqueue(url, jobs, name)
        busy = worker_cpu(url, concurrency, log_level, extra, work_dir)
        return (busy - base) / jobs * 1e6
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "redis", "postgres"], default="sqlite")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument(
        "--job", choices=["def", "async"], default="def", help="a `def` or `async def` no-op"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument("--log-level", default="info", help="the worker's --log-level")
    parser.add_argument("extra", nargs="*", help="more `fairq worker` options (after --)")
    args = parser.parse_args(argv)
    print(
        f"worker CPU per job: {args.store}, {args.jobs} {args.job} no-op jobs, 1 process x "
        f"{args.concurrency}, log level {args.log_level} {' '.join(args.extra)}".rstrip()
    )
    name = NOOP_ASYNC if args.job == "async" else NOOP
    found = []
    for n in range(1, args.runs + 1):
        found.append(
            run_once(args.store, args.jobs, name, args.concurrency, args.log_level, args.extra)
        )
        print(f"  run {n}: {found[-1]:6.0f} us CPU per job")
    print(f"median: {statistics.median(found):6.0f} us CPU per job")


if __name__ == "__main__":
    main()
