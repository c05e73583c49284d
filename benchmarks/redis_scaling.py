"""Does dequeue + ack stay flat as backlogged tenants grow? And what does Redis memory cost?

For each tenant count T, T tenants each get enough ready jobs to stay backlogged while
``--ops`` single dequeues run, each followed by its ack; the client-side latency of the pair
is reported (p50/p99). Memory is ``MEMORY USAGE`` (exact, SAMPLES 0) summed over fairq's
keys: once with one tenant holding ``--jobs`` ready jobs (bytes per queued job), once with
``--idle`` tenants that each ran one job and hold nothing (bytes per idle tenant).

    .venv/bin/python benchmarks/redis_scaling.py --tenants 10,1000,100000,1000000
"""

from __future__ import annotations

import argparse
import math
import os
import time

import redis

from fairq.backends.redis import RedisBackend
from fairq.contract import AckParams, DequeueParams, EnqueueParams, MaintainParams
from fairq.job import NewJob
from fairq.policy.metrics import percentile

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
PAYLOAD = '{"args":["t"],"kwargs":{}}'
BATCH = 5000


def jobs(tenants: int, per_tenant: int, start: int = 0) -> list[NewJob]:
    return [
        NewJob(id=f"j{start + n * tenants + t}", name="noop", queue="default", tenant=f"t{t}",
               payload=PAYLOAD, run_at=0.0, max_attempts=3, lease_timeout=300.0, cost=1.0)
        for n in range(per_tenant) for t in range(tenants)
    ]  # fmt: skip


def fresh() -> RedisBackend:
    backend = RedisBackend.from_url(f"{URL}?prefix=scale")
    backend.client.flushdb()
    return backend


def fill(backend: RedisBackend, tenants: int, per_tenant: int) -> None:
    made = jobs(tenants, per_tenant)
    for at in range(0, len(made), BATCH):
        backend.enqueue(EnqueueParams(jobs=made[at : at + BATCH], now=time.time()))


def latency(tenants: int, ops: int) -> tuple[float, float, float, float]:
    """Client p50/p99/mean µs per dequeue+ack pair, and Redis's own µs per pair.

    The server figure is EVALSHA time from ``INFO commandstats`` (reset first), so it is only
    meaningful on a Redis that nothing else uses while this runs.
    """
    backend = fresh()
    fill(backend, tenants, max(1, math.ceil(ops / tenants) + 1))
    backend.client.config_resetstat()
    times: list[float] = []
    for _ in range(ops):
        began = time.perf_counter()
        params = DequeueParams(queues=["default"], worker_id="w", now=time.time())
        (lease,) = backend.dequeue(params)
        backend.ack(AckParams(token=lease.token, now=time.time()))
        times.append((time.perf_counter() - began) * 1e6)
    server = backend.client.info("commandstats")["cmdstat_evalsha"]
    backend.close()
    mean = sum(times) / len(times)
    return percentile(times, 50), percentile(times, 99), mean, 2 * server["usec_per_call"]


def memory(client: redis.Redis) -> int:
    total = 0
    for key in client.scan_iter(match="scale:*", count=1000):
        total += int(client.memory_usage(key, samples=0) or 0)
    return total


def bytes_per_job(count: int) -> float:
    backend = fresh()
    fill(backend, 1, count)
    used = memory(backend.client)
    backend.close()
    return used / count


def bytes_per_idle_tenant(count: int) -> float:
    backend = fresh()
    fill(backend, count, 1)
    while leases := backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=time.time(), limit=1000)
    ):
        for lease in leases:
            backend.ack(AckParams(token=lease.token, now=time.time()))
    backend.maintain(MaintainParams(now=time.time() + 10, retention=1.0))
    used = memory(backend.client)
    backend.close()
    return used / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", default="10,1000,100000,1000000")
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--idle", type=int, default=50_000)
    args = parser.parse_args()
    print(f"dequeue + ack, one pair at a time, {args.ops} pairs per row (client-side µs)\n")
    print("| backlogged tenants | p50 µs | p99 µs | mean µs | in Redis µs |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for tenants in (int(t) for t in args.tenants.split(",")):
        p50, p99, mean, server = latency(tenants, args.ops)
        print(f"| {tenants:,} | {p50:.0f} | {p99:.0f} | {mean:.0f} | {server:.0f} |", flush=True)
    print(f"\nbytes per queued job ({args.jobs:,} ready jobs, one tenant): "
          f"{bytes_per_job(args.jobs):.0f}")  # fmt: skip
    print(f"bytes per idle tenant ({args.idle:,} tenants, each ran one job, pruned): "
          f"{bytes_per_idle_tenant(args.idle):.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
