"""One job per call, as most applications enqueue: fairq vs pgqueuer (vs procrastinate) on
PostgreSQL, measured in one run, idle and while workers drain the same queue.

For each system and round: a fresh database; with --busy, a backlog enqueued with the system's
batch API and W worker processes of its own worker draining it (started first, and still busy
when the producer ends: the script checks). Then one producer process enqueues --calls jobs,
one per call, through the API an application would use: fairq ``job.enqueue(tenant, n)``
(App, every layer included), pgqueuer ``Queries.enqueue`` (asyncpg), procrastinate
``task.defer``. Prints enqueues/s per round (systems alternated round by round, so load on a
shared machine falls on all alike), the medians and the ratios to the first system.

Setup (once): bash benchmarks/peers_pg/setup.sh
Run:          benchmarks/peers_pg/.venv/bin/python benchmarks/postgres_enqueue.py [--busy]
The server is $FAIRQ_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/...); the
benchmark creates and drops the database named in it (default fairq_bench).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import postgres_throughput as base

HERE = Path(__file__).resolve().parent

PRODUCERS = {
    "fairq": """
import os, sys, time
sys.path.insert(0, {apps!r})
from apps.fairq_app import app, noop
noop.enqueue("tenant-0", -1)  # connect and read the job types before the clock starts
started = time.perf_counter()
for n in range({calls}):
    noop.enqueue(f"tenant-{{n % {tenants}}}", n)
print(time.perf_counter() - started)
app.close()
""",
    "pgqueuer": """
import asyncio, os, time
import asyncpg
from pgqueuer import AsyncpgDriver, Queries
async def run():
    conn = await asyncpg.connect(os.environ["BENCH_DSN"])
    queries = Queries(AsyncpgDriver(conn))
    await queries.enqueue("noop", None, 0)
    started = time.perf_counter()
    for n in range({calls}):
        await queries.enqueue("noop", None, 0)
    print(time.perf_counter() - started)
    await conn.close()
asyncio.run(run())
""",
    "procrastinate": """
import sys, time
sys.path.insert(0, {apps!r})
from apps.procrastinate_app import app, noop
with app.open():
    noop.defer(n=-1)
    started = time.perf_counter()
    for n in range({calls}):
        noop.defer(n=n)
    print(time.perf_counter() - started)
""",
}


# jobs not yet done (queued or running): workers are busy while some remain
REMAINING = {
    "fairq": "SELECT (SELECT coalesce(sum(ready + running), 0) FROM fairq.tenants) "
    "+ (SELECT count(*) FROM fairq.inbox)",
    "pgqueuer": "SELECT count(*) FROM pgqueuer",
    "procrastinate": "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
}


def produce(name: str, args: argparse.Namespace) -> float:
    """Seconds the producer took for --calls single enqueues (in a process of its own)."""
    code = PRODUCERS[name].format(apps=str(base.APPS), calls=args.calls, tenants=args.tenants)
    out = subprocess.run(
        [sys.executable, "-c", code], env=base.env(args.url), cwd=HERE, check=True,
        capture_output=True, text=True,
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def measure(name: str, args: argparse.Namespace) -> dict[str, float]:
    system = base.SYSTEMS[name]
    base.fresh_database(args.url)
    if system.install is not None:
        system.install(args.url)
    procs: list[subprocess.Popen[bytes]] = []
    remaining = 0
    try:
        if args.busy:
            call = f"{args.url!r}, {args.backlog}, {args.tenants}"
            code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import postgres_throughput "
                    f"as b; b.SYSTEMS[{name!r}].enqueue({call})")  # fmt: skip
            subprocess.run([sys.executable, "-c", code], env=base.env(args.url), check=True,
                           cwd=HERE)  # fmt: skip
            workers = argparse.Namespace(**vars(args), queues=1, dedicated=False)
            procs = [
                subprocess.Popen(
                    system.workers(workers, index),
                    env=base.env(args.url),
                    cwd=base.APPS,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for index in range(args.workers)
            ]
            while base.count(args.url, REMAINING[name]) >= args.backlog:  # not yet draining
                if any(proc.poll() is not None for proc in procs):
                    raise RuntimeError(f"a {name} worker exited early")
                time.sleep(0.02)
        seconds = produce(name, args)
        remaining = base.count(args.url, REMAINING[name]) if args.busy else 0
        if args.busy and remaining == 0:
            raise RuntimeError(
                f"{name}'s workers ran out of backlog before the producer ended: raise --backlog"
            )
    finally:
        base.stop(procs)
    return {"rate": args.calls / seconds, "remaining": remaining}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("FAIRQ_BENCH_POSTGRES_URL",
                                                        base.DEFAULT_URL))  # fmt: skip
    parser.add_argument("--calls", type=int, default=2000, help="single enqueues per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--busy", action="store_true", help="while W workers drain a backlog")
    parser.add_argument("--backlog", type=int, default=40_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--systems", default="fairq,pgqueuer")
    args = parser.parse_args()
    names = args.systems.split(",")
    rates: dict[str, list[float]] = {name: [] for name in names}
    loads = []
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            loads.append(load())
            result = measure(name, args)
            rates[name].append(result["rate"])
            extra = f", {result['remaining']:.0f} jobs still to run" if args.busy else ""
            print(f"round {round_ + 1}: {name:14} {result['rate']:7.0f} enqueues/s "
                  f"(load {loads[-1]}{extra})", flush=True)  # fmt: skip
    first = statistics.median(rates[names[0]])
    mode = f"while {args.workers} worker processes drain" if args.busy else "idle"
    print(f"\n{args.calls} single-job enqueues per round, {args.rounds} rounds, {mode}; "
          f"load averages seen: {loads[0]} .. {loads[-1]}")  # fmt: skip
    print(f"| system | enqueues/s (median) | rounds | vs {names[0]} |")
    print("| --- | ---: | --- | ---: |")
    for name in names:
        median = statistics.median(rates[name])
        listed = ", ".join(f"{rate:.0f}" for rate in rates[name])
        print(f"| {name} | {median:.0f} | {listed} | {median / first:.2f}x |")
    print(json.dumps({name: statistics.median(r) for name, r in rates.items()}))


if __name__ == "__main__":
    main()
