"""Instructions Redis executes inside fairq's functions per job: a repeatable cost figure.

Run a private redis-server under callgrind, counting only inside FCALL, then this script;
it zeroes the counters before each phase and dumps them after it (``callgrind_control``),
and prints instructions per job for each phase:

    valgrind --tool=callgrind --toggle-collect=fcallCommand \\
        --callgrind-out-file=/tmp/fq-cg/cg.%p redis-server --port 6494 --bind 127.0.0.1 \\
        --save "" --appendonly no &
    .venv/bin/python benchmarks/redis_callgrind.py --url redis://127.0.0.1:6494/0 \\
        --pid <valgrind's pid> --out /tmp/fq-cg

Phases: ``enqueue`` (single jobs, one call each), ``enqueue_many`` (batches of
``--batch-enqueue``), ``pair`` (single dequeue + ack), ``batch`` (dequeue of 8 + one
ack_many). The script deletes every function loaded in that server first (a library left
by earlier code adds to every garbage collection). 10 tenants, a backlog of 20,000+ ready
jobs, 200 pairs of warm-up first (the library loaded, small zsets past their listpack size).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import time
from collections.abc import Callable

from fairq.backends.redis import RedisBackend
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams
from fairq.job import NewJob

PAYLOAD = '{"args":["t"],"kwargs":{}}'
TENANTS = 10


def new_jobs(start: int, count: int) -> list[NewJob]:
    return [
        NewJob(id=f"j{n}", name="noop", queue="default", tenant=f"t{n % TENANTS}",
               payload=PAYLOAD, run_at=0.0, max_attempts=3, lease_timeout=300.0, cost=1.0)
        for n in range(start, start + count)
    ]  # fmt: skip


def control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def instructions(out: str, before: set[str]) -> int:
    """The Ir total of the dump files written since ``before``."""
    total = 0
    for path in sorted(set(glob.glob(os.path.join(out, "cg.*"))) - before):
        with open(path) as dump:
            found = re.search(r"^(?:summary|totals): (\d+)", dump.read(), re.M)
        total += int(found.group(1)) if found else 0
    return total


def pairs(backend: RedisBackend, rounds: int, batch: int) -> None:
    for _ in range(rounds):
        params = DequeueParams(queues=["default"], worker_id="w", now=time.time(), limit=batch)
        leases = backend.dequeue(params).leases
        assert len(leases) == batch
        if batch == 1:
            backend.ack_many(AckManyParams(tokens=[leases[0].token], now=time.time()))
        else:
            backend.ack_many(AckManyParams(tokens=[x.token for x in leases], now=time.time()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--pid", type=int, required=True, help="valgrind's process id")
    parser.add_argument("--out", required=True, help="callgrind's output directory")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--batch-enqueue", type=int, default=100)
    args = parser.parse_args()
    backend = RedisBackend.from_url(args.url)
    backend.client.flushdb()
    backend.client.function_flush()  # only fairq's current library in the server's Lua
    for at in range(0, 20_000, 1000):
        backend.enqueue(EnqueueParams(jobs=new_jobs(at, 1000), now=time.time()))
    pairs(backend, 200, 1)
    next_id = 20_000
    enqueue_many_rounds = max(1, args.rounds // 10)
    phases: dict[str, tuple[int, Callable[[], object]]] = {
        "enqueue": (args.rounds, lambda: [
            backend.enqueue(EnqueueParams(jobs=new_jobs(next_id + i, 1), now=time.time()))
            for i in range(args.rounds)]),
        "enqueue_many": (enqueue_many_rounds * args.batch_enqueue, lambda: [
            backend.enqueue(EnqueueParams(
                jobs=new_jobs(next_id + args.rounds + i * args.batch_enqueue,
                              args.batch_enqueue), now=time.time()))
            for i in range(enqueue_many_rounds)]),
        "pair": (args.rounds, lambda: pairs(backend, args.rounds, 1)),
        "batch": (args.rounds // 5 * 8, lambda: pairs(backend, args.rounds // 5, 8)),
    }  # fmt: skip
    print("| phase | jobs | instructions per job |")
    print("| --- | ---: | ---: |")
    for name, (jobs, run) in phases.items():
        control(args.pid, "-z")
        before = set(glob.glob(os.path.join(args.out, "cg.*")))
        run()
        control(args.pid, f"--dump={name}")
        print(f"| {name} | {jobs} | {instructions(args.out, before) / jobs / 1000:,.0f} k |")
    backend.close()


if __name__ == "__main__":
    main()
