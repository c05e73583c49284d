"""One way to time every queue: enqueue N no-op jobs, then drain them with two workers.

Runs inside each system's own virtual environment, so it needs only redis-py. Every job does
one ``INCR`` of ``DONE_KEY``: completion is counted the same way for every system. Drain
throughput is measured from the first finished job to the last (worker start-up excluded).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

DONE_KEY = "bench:done"
URL = (
    os.environ.get("FAIRQ_BENCH_REDIS_URL")
    or os.environ.get("BENCH_REDIS_URL")  # its old name, read until the next release
    or "redis://127.0.0.1:6379/13"
)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEADLINE = 600.0


def counter() -> redis.Redis:
    return redis.Redis.from_url(URL)


def mark_done(client: redis.Redis) -> None:
    client.incr(DONE_KEY)


def measure(
    n: int,
    enqueue: Callable[[int], None],
    workers: Sequence[Sequence[str]],
    cwd: Path = HERE,
    finished: Callable[[], int] | None = None,
) -> dict[str, float]:
    """Enqueue ``n`` jobs (timed), start ``workers`` (commands), time the drain. ``finished``
    counts the jobs done, for a job that does not count itself (default: ``DONE_KEY``)."""
    client = counter()
    client.flushdb()
    count = finished or (lambda: done_count(client))
    started = time.perf_counter()
    enqueue(n)
    enqueued = time.perf_counter()
    with running(workers, cwd):
        first, c0 = wait_done(count, 1)
        last, _ = wait_done(count, n)
    return {
        "enqueue_per_s": n / (enqueued - started),
        "drain_per_s": (n - c0) / (last - first) if last > first else float("nan"),
    }


@contextmanager
def running(workers: Sequence[Sequence[str]], cwd: Path) -> Iterator[list[int]]:
    """Worker processes (commands) for the ``with`` block, killed with their children after;
    yields their pids.

    They find the job modules in ``cwd`` and here, then wherever the caller's PYTHONPATH
    points (so another checkout of fairq can be measured).
    """
    path = [str(cwd), str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "FAIRQ_BENCH_REDIS_URL": URL,
           "PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}  # fmt: skip
    procs = [
        subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        for cmd in workers
    ]  # fmt: skip
    try:
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def done_count(client: redis.Redis) -> int:
    """Jobs that counted themselves done (``mark_done``)."""
    return int(client.get(DONE_KEY) or 0)


def wait_done(count: Callable[[], int], target: int) -> tuple[float, int]:
    """When ``count()`` first reached ``target``, and what it was then."""
    deadline = time.monotonic() + DEADLINE
    while True:
        done = count()
        if done >= target:
            return time.perf_counter(), done
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done} of {target} jobs finished")
        time.sleep(0.002)


def report(result: dict[str, float]) -> None:
    """The one line a peer script prints: read by benchmarks/redis_throughput.py."""
    json.dump(result, sys.stdout)
    print()
