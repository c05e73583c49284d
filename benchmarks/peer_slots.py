"""fairq's tenant slots and router on plain Celery, RQ and Dramatiq (no relay): how fast a
capped tenant drains, and what slots and the router cost per job beside the plain peer.

* **Capped tenant**: 10 jobs of 200 ms of one tenant at cap 1, on 2 idle, warm job slots
  (Celery prefork 2, two ``rq worker``s, one with the scheduler, Dramatiq 1 process of 2
  threads): seconds from the first send to the last job's end, against the ideal 2.0 s (the
  jobs one after another). A job that finds the slot taken waits in the tenant's line; the
  release of the slot sends it again at once (fairq/integrations/slots.py).
* **Per-job cost**: ``--jobs`` no-op jobs over 10 tenants drained by the same 2 slots, the plain
  task, the slot-guarded one (a cap no run reaches: the acquire and release are paid, nothing
  waits) and the routed one (one ``route`` call per send, paid by the producer), ``--rounds``
  rounds with the order rotated each round. Printed: the drain rate and its ratio to plain,
  CPU ms per job of the workers and of Redis over the drain, and the producer's send CPU per job
  (with Redis's). Medians of the rounds.

Broker, counters and the fairq store share $FAIRQ_BENCH_REDIS_URL (flushed); ``--rabbitmq URL`` adds
Celery and Dramatiq rows with that RabbitMQ as the broker (a vhost of your own: queues are left
empty, but timed copies of deferred jobs may be delivered to the next run and dropped there).

    FAIRQ_BENCH_REDIS_URL=redis://127.0.0.1:6379/13 .venv/bin/python benchmarks/peer_slots.py
    .venv/bin/python benchmarks/peer_slots.py --peers celery --rabbitmq amqp://guest:guest@127.0.0.1:5672/bench
    .venv/bin/python benchmarks/peer_slots.py --baseline /path/to/older/checkout

``--baseline``: the capped rows also with the workers importing fairq from another checkout,
alternated with this one's in every round.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from unittest.mock import patch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _drive import URL, counter, done_count, running, wait_done  # noqa: E402
from relay_throughput import redis_cpu, session_cpu  # noqa: E402

PEERS = ("celery", "rq", "dramatiq")
MODES = ("plain", "slots", "router")
CAPPED_JOBS, CAPPED_SECONDS = 10, 0.2
IDEAL = CAPPED_JOBS * CAPPED_SECONDS


def load(name: str, broker: str | None) -> ModuleType:
    """The peer's job module, imported afresh under ``broker`` (None: the Redis)."""
    env = {"BENCH_BROKER_URL": broker} if broker else {}
    with patch.dict(os.environ, env):
        sys.modules.pop(f"slots_{name}_jobs", None)
        return importlib.import_module(f"slots_{name}_jobs")


def commands(peer: ModuleType) -> list[list[str]]:
    return getattr(peer, "WORKERS", None) or [peer.WORKER]


def environment(peer: ModuleType, broker: str | None) -> dict[str, str]:
    return {**getattr(peer, "ENV", {}), **({"BENCH_BROKER_URL": broker} if broker else {})}


def fresh(peer: ModuleType) -> None:
    counter().flushdb()
    if hasattr(peer, "prepare"):
        peer.prepare()


def capped(peer: ModuleType, broker: str | None, baseline: str | None = None) -> float:
    """Seconds from the first send of the capped tenant's jobs to the last one's end (the
    workers importing fairq from ``baseline``, another checkout, when given)."""
    fresh(peer)
    client = counter()
    env = environment(peer, broker)
    if baseline:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [baseline, os.environ.get("PYTHONPATH")]))
    with patch.dict(os.environ, env), running(commands(peer), HERE / "peers"):
        peer.send("plain", "warm-up", 0.0)
        wait_done(lambda: done_count(client), 1)
        started = time.perf_counter()
        for _ in range(CAPPED_JOBS):
            peer.send("capped", "capped", CAPPED_SECONDS)
        ended, _ = wait_done(lambda: done_count(client), CAPPED_JOBS + 1)
    return ended - started


def drain(
    peer: ModuleType, broker: str | None, mode: str, n: int
) -> tuple[float, float, float, float]:
    """Jobs/s, CPU ms per job of the workers and of Redis over the drain, and the send's."""
    fresh(peer)
    client = counter()
    sent, redis_sent = time.process_time(), redis_cpu(client)
    for i in range(n):
        peer.send(mode, f"t{i % 10}", 0.0)
    send_ms = (time.process_time() - sent + redis_cpu(client) - redis_sent) / n * 1000
    count = lambda: done_count(client)  # noqa: E731
    workers = running(commands(peer), HERE / "peers")
    with patch.dict(os.environ, environment(peer, broker)), workers as pids:
        first, c0 = wait_done(count, 1)
        before = session_cpu(pids), redis_cpu(client)
        last, _ = wait_done(count, n)
        after = session_cpu(pids), redis_cpu(client)
    jobs = n - c0
    work, server = ((b - a) / jobs * 1000 for a, b in zip(before, after, strict=True))
    return jobs / (last - first), work, server, send_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rq-jobs", type=int, default=500, help="RQ forks a process per job")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rabbitmq", metavar="URL", help="also Celery and Dramatiq on it")
    parser.add_argument(
        "--baseline", metavar="PATH", help="capped rows also for another checkout's fairq"
    )
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} load {os.getloadavg()[0]:.1f}; {URL}")
    for name in filter(None, args.peers.split(",")):
        brokers: list[str | None] = [None]
        if args.rabbitmq and name != "rq":
            brokers.append(args.rabbitmq)
        for broker in brokers:
            peer = load(name, broker)
            label = f"{name} on {'RabbitMQ' if broker else 'Redis'}"
            variants = (
                {"this": None, "baseline": args.baseline} if args.baseline else {"this": None}
            )
            times: dict[str, list[float]] = {v: [] for v in variants}
            for r in range(args.rounds):  # alternated, so both see the same load
                for v in list(variants)[:: 1 if r % 2 == 0 else -1]:
                    times[v].append(capped(peer, broker, variants[v]))
            for v, got in times.items():
                took = statistics.median(got)
                print(
                    f"{label}{' (baseline)' if v == 'baseline' else ''}: capped tenant "
                    f"{CAPPED_JOBS} x {CAPPED_SECONDS * 1000:.0f} ms at cap 1: {took:.2f} s "
                    f"(ideal {IDEAL:.1f} s, {took / IDEAL:.2f}x; rounds "
                    f"{', '.join(f'{t:.2f}' for t in got)})"
                )
            n = args.rq_jobs if name == "rq" else args.jobs
            got: dict[str, list[tuple[float, float, float, float]]] = {m: [] for m in MODES}
            for r in range(args.rounds):
                for mode in MODES[r % 3 :] + MODES[: r % 3]:
                    got[mode].append(drain(peer, broker, mode, n))
            plain = statistics.median(rate for rate, *_ in got["plain"])
            for mode in MODES:
                rate, workers, server, send = (
                    statistics.median(x) for x in zip(*got[mode], strict=True)
                )
                print(
                    f"  {mode:6} {n} no-op jobs: {rate:6.0f} jobs/s ({rate / plain:.2f}x plain); "
                    f"CPU ms/job workers {workers:.2f}, Redis {server:.2f}; send {send:.2f}"
                )


if __name__ == "__main__":
    main()
