"""Celery, RQ and Dramatiq with and without fairq in front (the relay), in one run.

The flood of benchmarks/redis_fairness.py, at 2 job slots per system: one tenant's ``--big``
jobs of 5 ms, then 10 small tenants with ``--each``. Per peer and mode it reports the small
tenants' wait (enqueue → start) p50/p99 alone and under the flood, Jain's index while every
tenant is backlogged, the drain rate of ``--drain`` jobs of 5 ms (the flood's jobs: the cost the
issue's goal is about) and of as many no-op jobs (the relay's per-job cost laid bare), and the
idle latency (one job at a time, enqueue → start, p50 of 30). ``relay`` is the same peer
workers with ``fairq relay`` releasing fair tasks into the broker, at most ``--in-flight`` at a
time. Broker, counters and the fairq store share the benchmark Redis ($FAIRQ_BENCH_REDIS_URL,
default database 13, flushed); ``--broker amqp://…`` puts Celery's and Dramatiq's broker on
RabbitMQ instead (its queues purged first). The peers run at the settings the docs advise
(Celery: late acks, prefetch 1; publisher confirms on RabbitMQ), or at their own defaults
with ``--peer-defaults``. Needs the dev install (celery, rq, dramatiq come with it):

    .venv/bin/python benchmarks/relay_fairness.py
    .venv/bin/python benchmarks/relay_fairness.py --peers celery,dramatiq \
        --broker amqp://guest:guest@127.0.0.1:5672/
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

from _drive import measure, running  # noqa: E402
from _flood import JOB_SECONDS, STARTS_KEY, counter, flood  # noqa: E402

PEERS = ("celery", "rq", "dramatiq")
Figures = dict[str, object]


def workers(peer: ModuleType, name: str, relay: bool, in_flight: int) -> list[list[str]]:
    """The peer's workers (2 slots in all), and a relay in front when ``relay``."""
    commands = [peer.WORKER] * (peer.SLOTS if name == "rq" else 1)
    if relay:
        relay_cmd = [sys.executable, "-m", "fairq", "--log-level", "warning", "relay"]
        commands.append([*relay_cmd, f"{peer.__name__}:fair", "--in-flight", str(in_flight)])
    return commands


def idle_latency(peer: ModuleType, cmds: list[list[str]], relay: bool, n: int = 30) -> float:
    """p50 ms from enqueue to start, one job at a time on idle workers."""
    client = counter()
    client.flushdb()
    waits = []
    with running(cmds, HERE / "peers"):
        peer.send(relay, "warm-up", time.time())
        _wait_len(client, 1)
        for i in range(n):
            peer.send(relay, "t", time.time())
            _wait_len(client, i + 2)
        for raw in client.lrange(STARTS_KEY, 1, -1):
            _, enqueued, started = raw.decode().split(",")
            waits.append(float(started) - float(enqueued))
    return statistics.median(waits) * 1000


def _wait_len(client: object, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while client.llen(STARTS_KEY) < n:  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {n} never started")
        time.sleep(0.0005)


def run_peer(name: str, relay: bool, args: argparse.Namespace) -> Figures:
    peer = importlib.import_module(f"relay_{name}_jobs")
    cmds = workers(peer, name, relay, args.in_flight)
    figures: Figures = {}
    for alone in (True, False):
        run = argparse.Namespace(**{**vars(args), "alone": alone})

        def send(tenant: str, at: float) -> None:
            peer.send(relay, tenant, at)

        figures["alone" if alone else "flood"] = flood(send, cmds, run, cwd=HERE / "peers")
    for key, seconds in (("drain_per_s", JOB_SECONDS), ("noop_per_s", 0.0)):
        drained = measure(
            args.drain, lambda n, s=seconds: peer.send_drain(relay, n, s), cmds, cwd=HERE / "peers"
        )
        figures[key] = drained["drain_per_s"]
    figures["idle_ms"] = idle_latency(peer, cmds, relay)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big", type=int, default=2000)
    parser.add_argument("--each", type=int, default=20)
    parser.add_argument("--drain", type=int, default=2000)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--broker", default=None, help="amqp://…: RabbitMQ (Celery, Dramatiq)")
    parser.add_argument(
        "--peer-defaults",
        action="store_true",
        help="each peer at its defaults (Celery: no late acks, prefetch 4; no publisher confirms)",
    )
    args = parser.parse_args()
    if args.broker:  # read by the peers' modules, here and in their worker and relay processes
        os.environ["BENCH_BROKER_URL"] = args.broker
        _purge(args.broker)
    if args.peer_defaults:
        os.environ["BENCH_PEER_SETTINGS"] = "defaults"
    rows = []
    for name in filter(None, args.peers.split(",")):
        for relay in (False, True):
            label = f"{name} + fairq relay" if relay else name
            print(f"{label} ...", file=sys.stderr)
            rows.append((name, relay, run_peer(name, relay, args)))
    _print(rows, args)


def _purge(url: str) -> None:
    """Empty the peers' RabbitMQ queues (a run stopped half-way leaves messages behind)."""
    from kombu import Connection

    with Connection(url) as connection:
        for queue in ("celery", "plain", "fair", "plain.DQ", "fair.DQ"):
            channel = connection.channel()
            try:
                channel.queue_purge(queue)
                channel.close()
            except Exception:  # no such queue yet (the broker closed the channel)
                continue


def _ms(figures: object, key: str) -> str:
    value = float(figures[key])  # type: ignore[index]
    at = ("small_p50_ms", "small_p99_ms").index(key)
    censored = figures["censored_at"][at]  # type: ignore[index]
    return f"{'>' if censored else ''}{value:,.0f}"


def _print(rows: list[tuple[str, bool, Figures]], args: argparse.Namespace) -> None:
    broker = (
        "Redis"
        if not args.broker
        else "RabbitMQ"
        + (
            ", peers at their defaults (no publisher confirms)"
            if args.peer_defaults
            else ", publisher confirms on (the docs' option)"
        )
    )
    print(
        f"\none tenant floods {args.big:,} jobs of 5 ms, then 10 small tenants enqueue "
        f"{args.each} each; 2 job slots per system; relay --in-flight {args.in_flight}; "
        f"broker: {broker}\n"
    )
    print(
        "| system | small p50 / p99 alone (ms) | small p50 / p99 flood (ms) | Jain while "
        "backlogged | drain, 5 ms jobs (jobs/s) | relay / peer | drain, no-ops (jobs/s) "
        "| relay / peer | idle enqueue → start p50 (ms) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    plain: dict[str, Figures] = {}
    for name, relay, f in rows:
        alone, flooded = f["alone"], f["flood"]
        jain = flooded["jain"]  # type: ignore[index]
        if not relay:
            plain[name] = f
        drains = []
        for key in ("drain_per_s", "noop_per_s"):
            rate = float(f[key])  # type: ignore[arg-type]
            ratio = ""
            if relay and name in plain:
                ratio = f"{rate / float(plain[name][key]):.2f}×"  # type: ignore[arg-type]
            drains.append(f"{rate:,.0f} | {ratio}")
        print(f"| {name}{' + fairq relay' if relay else ''} "
              f"| {_ms(alone, 'small_p50_ms')} / {_ms(alone, 'small_p99_ms')} "
              f"| {_ms(flooded, 'small_p50_ms')} / {_ms(flooded, 'small_p99_ms')} "
              f"| {'n/a' if jain is None else f'{float(jain):.2f}'} "
              f"| {' | '.join(drains)} | {float(f['idle_ms']):.1f} |")  # type: ignore[arg-type]  # fmt: skip


if __name__ == "__main__":
    main()
