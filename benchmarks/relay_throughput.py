"""What the relay costs a peer's drain: Celery, RQ and Dramatiq alone and behind ``fairq relay``.

Per peer, settings and job kind, ``--rounds`` pairs of runs, the peer alone and + relay
alternated (the order flips each round, so both see the same load): ``--jobs`` jobs over 10
tenants are stored first (in the broker alone, in fairq + relay), then 2 job slots drain them
(Celery prefork 2, two ``rq worker``s, Dramatiq 1 process of 2 threads) with the relay holding
at most ``--in-flight`` (default 4: twice the slots) in the broker. Printed per pair: the drain
rate (first finished job to last), the ratio + relay / alone (median of the rounds' ratios),
CPU per job (user+system of the workers with their children, the relay, and the Redis server,
over the same window; of it the relay's and Redis's), the CPU per job of the peer's own send
before the drain (alone: what the relay's publish repeats inside the window) and the idle
enqueue → start p50 (one job at a time, 30 jobs).

Settings: ``defaults`` is each peer as it comes (Celery: early acks, prefetch 4 per process;
Dramatiq: prefetch twice the threads, 1 s idle poll); ``advised`` is what docs/integrations
advises, on both sides (Celery: ``task_acks_late`` + ``worker_prefetch_multiplier=1``;
Dramatiq: ``dramatiq_queue_prefetch`` = threads, ``dramatiq_worker_timeout=100``). RQ has no such
settings: one row. Broker, counters and the fairq store share $FAIRQ_BENCH_REDIS_URL (flushed).

    FAIRQ_BENCH_REDIS_URL=redis://127.0.0.1:6379/13 .venv/bin/python benchmarks/relay_throughput.py
    .venv/bin/python benchmarks/relay_throughput.py --peers celery --kinds noop --jobs 20000
    .venv/bin/python benchmarks/relay_throughput.py --baseline /path/to/older/checkout

``--baseline`` adds a third variant to every round: the relay and workers importing fairq from
another checkout, to see what a change buys under the same load.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _drive import URL, counter, done_count, running, wait_done  # noqa: E402
from _flood import JOB_SECONDS  # noqa: E402
from relay_fairness import idle_latency, workers  # noqa: E402

PEERS = ("celery", "rq", "dramatiq")
KINDS = {"noop": 0.0, "5ms": JOB_SECONDS}
#: The settings docs/integrations advises, per peer (environment the job modules and the peer
#: read; relay_{peer}_jobs.py reads BENCH_PEER_SETTINGS).
ADVISED_ENV = {
    "celery": {},
    "rq": {},
    "dramatiq": {"dramatiq_queue_prefetch": "2", "dramatiq_worker_timeout": "100"},
}
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Drain:
    per_s: float
    cpu_ms: float  # per job: workers, relay and Redis
    parts: tuple[float, float, float]  # of it: workers, relay, Redis
    send_ms: float  # CPU per job of the send before the drain (not in cpu_ms): the producer's


def session_cpu(leaders: list[int]) -> float:
    """CPU seconds of every process in the sessions ``leaders`` started, with their reaped
    children (an RQ work horse's time lands in its worker's)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in leaders:  # the session id (field 6)
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def drain(peer: object, name: str, relay: bool, n: int, seconds: float, in_flight: int) -> Drain:
    client = counter()
    client.flushdb()
    sent, redis_sent = time.process_time(), redis_cpu(client)
    peer.send_drain(relay, n, seconds)  # type: ignore[attr-defined]
    send_ms = (time.process_time() - sent + redis_cpu(client) - redis_sent) / n * 1000
    cmds = workers(peer, name, relay, in_flight)  # type: ignore[arg-type]
    count = lambda: done_count(client)  # noqa: E731
    with running(cmds, HERE / "peers") as pids:
        peers, relays = (pids[:-1], pids[-1:]) if relay else (pids, [])
        first, c0 = wait_done(count, 1)
        before = session_cpu(peers), session_cpu(relays), redis_cpu(client)
        last, _ = wait_done(count, n)
        after = session_cpu(peers), session_cpu(relays), redis_cpu(client)
    jobs = n - c0
    w, r, s = ((b - a) / jobs * 1000 for a, b in zip(before, after, strict=True))
    print(
        f"  CPU ms/job: workers {w:.2f}, relay {r:.2f}, Redis {s:.2f}; before the drain, the "
        f"producer's send {send_ms:.2f} (with Redis)",
        file=sys.stderr,
    )
    return Drain(jobs / (last - first), w + r + s, (w, r, s), send_ms)


def environment(env: dict[str, str]) -> Any:
    """``env`` set for the worker processes started inside (and the imports made inside)."""
    return patch.dict(os.environ, env)


def settings(name: str, which: str) -> dict[str, str]:
    return {"BENCH_PEER_SETTINGS": which, **(ADVISED_ENV[name] if which == "advised" else {})}


def modes(baseline: str | None) -> dict[str, tuple[bool, dict[str, str]]]:
    """Each variant run: whether through the relay, and its environment (a baseline: the
    workers and the relay import fairq from that checkout)."""
    found = {"alone": (False, {}), "relay": (True, {})}
    if baseline:
        path = os.pathsep.join(filter(None, [baseline, os.environ.get("PYTHONPATH")]))
        found["baseline"] = (True, {"PYTHONPATH": path})
    return found


Row = tuple[str, str, str, list[dict[str, Drain]], dict[str, float]]


def measure_peer(name: str, which: str, args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    variants = modes(args.baseline)
    n = args.rq_jobs if name == "rq" else args.jobs
    with environment(settings(name, which)):
        # a fresh import per settings: the module reads them when imported
        sys.modules.pop(f"relay_{name}_jobs", None)
        peer = importlib.import_module(f"relay_{name}_jobs")
        for kind in filter(None, args.kinds.split(",")):
            rounds = []
            for r in range(args.rounds):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                got = {}
                for mode in order:
                    relay, env = variants[mode]
                    print(f"{name} {which} {kind} {mode} ...", file=sys.stderr)
                    with environment(env):
                        got[mode] = drain(peer, name, relay, n, KINDS[kind], args.in_flight)
                rounds.append(got)
            idle: dict[str, float] = {}
            if args.idle and kind == "noop":
                for mode, (relay, env) in variants.items():
                    with environment(env):
                        cmds = workers(peer, name, relay, args.in_flight)
                        idle[mode] = idle_latency(peer, cmds, relay, args.idle)
            rows.append((name, which, kind, rounds, idle))
            for line in _lines(rows[-1]):
                print(line, file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rq-jobs", type=int, default=500, help="RQ forks a process per job")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--settings", default="defaults,advised")
    parser.add_argument("--idle", type=int, default=30, help="idle latency samples (0: skip)")
    parser.add_argument(
        "--baseline", metavar="PATH", help="also the relay of another checkout (its fairq)"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the workers are stopped on the way
    started = time.strftime("%Y-%m-%d %H:%M")
    print(f"{started} load {os.getloadavg()[0]:.1f}; {URL}", file=sys.stderr)
    rows: list[Row] = []
    for name in filter(None, args.peers.split(",")):
        for which in ["defaults"] if name == "rq" else args.settings.split(","):
            rows += measure_peer(name, which, args)
    print(
        f"\n{args.jobs:,} jobs per run (RQ {args.rq_jobs:,}), 2 job slots, relay --in-flight "
        f"{args.in_flight}, {args.rounds} rounds alternated (medians); load "
        f"{os.getloadavg()[0]:.1f}" + (f"; baseline: {args.baseline}" if args.baseline else "")
    )
    print(
        "\n| peer | settings | job | system | drain (jobs/s) | / alone | CPU/job (ms) | of which "
        "relay / Redis (ms) | idle enqueue → start p50 (ms) |"
    )
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        for line in _lines(row):
            print(line)


def _lines(row: Row) -> list[str]:
    name, which, kind, rounds, idle = row
    med = statistics.median
    lines = []
    for mode in rounds[0]:
        runs = [r[mode] for r in rounds]
        ratio = (
            ""
            if mode == "alone"
            else f"{med(r[mode].per_s / r['alone'].per_s for r in rounds):.2f}×"
        )
        parts = (
            ""
            if mode == "alone"
            else (f"{med(d.parts[1] for d in runs):.2f} / {med(d.parts[2] for d in runs):.2f}")
        )
        label = {
            "alone": name,
            "relay": f"{name} + relay",
            "baseline": f"{name} + relay (baseline)",
        }
        wait = f"{idle[mode]:.1f}" if mode in idle else ""
        lines.append(
            f"| {name} | {which} | {kind} | {label[mode]} | {med(d.per_s for d in runs):,.0f} "
            f"| {ratio} | {med(d.cpu_ms for d in runs):.2f} | {parts} | {wait} |"
        )
    send = med(r["alone"].send_ms for r in rounds)
    lines.append(
        f"|  |  |  | ({name}'s own send before the drain: {send:.2f} ms CPU/job) |  |  |  |  |  |"
    )
    return lines


if __name__ == "__main__":
    main()
