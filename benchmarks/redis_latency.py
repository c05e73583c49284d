"""Idle latency: how soon does an idle worker start a job after it is enqueued?

One ``fairq worker`` process (default concurrency) waits idle on the wake-up list; jobs are
enqueued one at a time, ``--gap`` seconds apart so the worker is idle each time, and each job
records ``time.time()`` at its start minus the enqueue time passed in its arguments (same
machine, same clock). Reports p50/p99 over ``--n`` jobs, and beside them the floor any
Redis queue has on this machine: a bare ``LPUSH`` → ``BLPOP`` hand-off between two threads,
as far apart.

    .venv/bin/python benchmarks/redis_latency.py --n 500
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from redis_latency_jobs import LATENCIES, URL, app, stamp  # noqa: E402

from fairq.policy.metrics import percentile  # noqa: E402


def hand_off(client: redis.Redis, n: int, gap: float) -> list[float]:
    """Milliseconds from an ``LPUSH`` to the ``BLPOP`` it wakes on another connection."""
    key = "bench:handoff"
    waiting = redis.Redis.from_url(URL)
    found: list[float] = []

    def wait() -> None:
        for _ in range(n):
            _, sent = waiting.blpop([key])
            found.append((time.time() - float(sent)) * 1000)

    thread = threading.Thread(target=wait)
    thread.start()
    for _ in range(n):
        time.sleep(gap)
        client.lpush(key, repr(time.time()))
    thread.join()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--gap", type=float, default=0.02)
    args = parser.parse_args()
    client = redis.Redis.from_url(URL)
    client.flushdb()
    app.publish()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "fairq", "worker", "redis_latency_jobs:app"],
        cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        stamp.enqueue("warm-up", time.time())
        while client.llen(LATENCIES) < 1:
            time.sleep(0.01)
        client.delete(LATENCIES)
        for n in range(args.n):
            time.sleep(args.gap)
            stamp.enqueue(f"t{n % 10}", time.time())
        while client.llen(LATENCIES) < args.n:
            time.sleep(0.01)
    finally:
        worker.terminate()
        worker.wait()
    values = [float(v) * 1000 for v in client.lrange(LATENCIES, 0, -1)]
    print(f"enqueue -> start, idle worker, {args.n} jobs: p50 {percentile(values, 50):.2f} ms, "
          f"p99 {percentile(values, 99):.2f} ms")  # fmt: skip
    floor = hand_off(client, args.n, args.gap)
    print(f"bare LPUSH -> BLPOP hand-off, {args.n} pushes: p50 {percentile(floor, 50):.2f} ms, "
          f"p99 {percentile(floor, 99):.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
