"""Does dequeue + ack stay flat as backlogged tenants grow? And what does Redis memory cost?

For each tenant count T, T tenants each get enough ready jobs to stay backlogged while
``--ops`` single dequeues run, each followed by its ack; the client-side latency of the pair
is reported (p50/p99), with Redis's own time per job. ``--batch 8`` dequeues 8 jobs at a
time and acks them with one ack_many, as the worker does. Memory is ``MEMORY USAGE`` (exact,
SAMPLES 0) summed over fairq's keys: once with one tenant holding ``--jobs`` ready jobs
(bytes per queued job), once with ``--idle`` tenants that each ran one job: bytes per idle
tenant while its succeeded job is kept (its record and interned name, the job not counted),
and after that job is pruned, which forgets the tenant (0: nothing of it is left).

    .venv/bin/python benchmarks/redis_scaling.py --tenants 10,1000,100000,1000000
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import replace

import redis

from fairq.backends.redis import RedisBackend
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, MaintainParams
from fairq.job import NewJob
from fairq.policy.metrics import percentile

URL = (
    os.environ.get("FAIRQ_BENCH_REDIS_URL")
    or os.environ.get("BENCH_REDIS_URL")  # its old name, read until the next release
    or "redis://127.0.0.1:6379/13"
)
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


def server_cpu(client: redis.Redis) -> float:
    """CPU seconds the Redis server process has used, when it runs on this machine (else 0).

    Unlike commandstats' wall-clock µs, CPU time does not grow when other processes take the
    cores, so it is the figure to compare on a busy machine (on a Redis of one's own).
    """
    pid = client.info("server")["process_id"]
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency(tenants: int, ops: int, batch: int) -> tuple[float, float, float, float, float]:
    """Client p50/p99/mean µs per round (``batch`` jobs dequeued, then acked together), and
    Redis's own µs per job (dequeue + ack).

    The server figure is the script time (EVALSHA and FCALL) from ``INFO commandstats``
    (reset first), so it is only meaningful on a Redis that nothing else uses meanwhile.
    A batch of 1 is one dequeue and one ack; more is one dequeue and one ack_many, as the
    worker does.
    """
    backend = fresh()
    fill(backend, tenants, max(1, math.ceil(ops * batch / tenants) + 1))
    backend.client.config_resetstat()
    cpu = server_cpu(backend.client)
    times: list[float] = []
    for _ in range(ops):
        began = time.perf_counter()
        params = DequeueParams(queues=["default"], worker_id="w", now=time.time(), limit=batch)
        leases = backend.dequeue(params).leases
        if batch == 1:
            backend.ack_many(AckManyParams(tokens=[leases[0].token], now=time.time()))
        else:
            backend.ack_many(AckManyParams(tokens=[x.token for x in leases], now=time.time()))
        times.append((time.perf_counter() - began) * 1e6)
    stats = backend.client.info("commandstats")
    cpu = server_cpu(backend.client) - cpu
    backend.close()
    runs = [stats.get(f"cmdstat_{c}", {}) for c in ("evalsha", "fcall")]
    usec, calls = sum(r.get("usec", 0) for r in runs), sum(r.get("calls", 0) for r in runs)
    if calls != 2 * ops:
        print(f"(warning: {calls} script calls for {2 * ops}: another client used this Redis)")
    mean = sum(times) / len(times)
    jobs = ops * batch
    return percentile(times, 50), percentile(times, 99), mean, usec / jobs, cpu * 1e6 / jobs


def enqueue_cost(tenants: int, ops: int, batch: int) -> tuple[float, float]:
    """Redis's script µs and CPU µs per job for ``ops`` enqueue calls of ``batch`` jobs each,
    onto ``tenants`` tenants that already hold 100 ready jobs each (as for ``latency``)."""
    backend = fresh()
    fill(backend, tenants, 100)
    start = 0
    backend.client.config_resetstat()
    cpu = server_cpu(backend.client)
    for n in range(ops):  # the tenants in turn, one job each
        made = [
            replace(job, id=f"e{start + n * batch + i}", tenant=f"t{(n * batch + i) % tenants}")
            for i, job in enumerate(jobs(1, batch))
        ]
        backend.enqueue(EnqueueParams(jobs=made, now=time.time()))
    stats = backend.client.info("commandstats").get("cmdstat_fcall", {})
    cpu = server_cpu(backend.client) - cpu
    backend.close()
    if stats.get("calls", 0) != ops:
        print(f"(warning: {stats.get('calls', 0)} calls for {ops}: another client used this Redis)")
    return stats.get("usec", 0) / (ops * batch), cpu * 1e6 / (ops * batch)


def memory(client: redis.Redis, under: str = "") -> int:
    total = 0
    for key in client.scan_iter(match=f"scale:{under}*", count=1000):
        total += int(client.memory_usage(key, samples=0) or 0)
    return total


def bytes_per_job(count: int) -> float:
    backend = fresh()
    fill(backend, 1, count)
    used = memory(backend.client)
    backend.close()
    return used / count


def bytes_per_idle_tenant(count: int) -> tuple[float, float]:
    """(before, after) pruning: the tenant's own keys' share, then everything left (the
    queue's meta and its empty-of-tenants keys) per tenant."""
    backend = fresh()
    fill(backend, count, 1)
    while leases := backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=time.time(), limit=1000)
    ).leases:
        for lease in leases:
            backend.ack_many(AckManyParams(tokens=[lease.token], now=time.time()))
    kept = memory(backend.client, "{default}:t")  # tenants, tids, tnames
    backend.maintain(MaintainParams(now=time.time() + 10, retention=1.0))
    pruned = memory(backend.client)
    backend.close()
    return kept / count, pruned / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", default="10,1000,100000,1000000")
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--idle", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=1, help="jobs per dequeue (ack_many if > 1)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory figures")
    parser.add_argument(
        "--enqueue", type=int, default=0, metavar="N",
        help="only time enqueue: N calls of --batch jobs each, on the first --tenants count",
    )  # fmt: skip
    args = parser.parse_args()
    if args.enqueue:
        tenants = int(args.tenants.split(",")[0])
        usec, cpu = enqueue_cost(tenants, args.enqueue, args.batch)
        print(f"enqueue, {args.batch} jobs per call, {args.enqueue} calls, {tenants} tenants: "
              f"Redis {usec:.1f} µs per job (script time), CPU {cpu:.1f} µs per job")  # fmt: skip
        return
    print(f"dequeue (limit {args.batch}) + ack of those jobs, {args.ops} rounds per row: "
          "client-side µs per round; Redis µs per job (script time from commandstats) "
          "and Redis CPU µs per job (whole server process)\n")  # fmt: skip
    print("| backlogged tenants | p50 µs | p99 µs | mean µs | Redis µs per job | Redis CPU µs |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for tenants in (int(t) for t in args.tenants.split(",")):
        p50, p99, mean, server, cpu = latency(tenants, args.ops, args.batch)
        row = f"| {tenants:,} | {p50:.0f} | {p99:.0f} | {mean:.0f} | {server:.0f} | {cpu:.0f} |"
        print(row, flush=True)
    if args.no_memory:
        return
    print(f"\nbytes per queued job ({args.jobs:,} ready jobs, one tenant): "
          f"{bytes_per_job(args.jobs):.0f}")  # fmt: skip
    kept, pruned = bytes_per_idle_tenant(args.idle)
    print(f"bytes per idle tenant ({args.idle:,} tenants, each ran one job): {kept:.0f} while "
          f"its succeeded job is kept, {pruned:.0f} once it is pruned (forgotten)")  # fmt: skip


if __name__ == "__main__":
    main()
