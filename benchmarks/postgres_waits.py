"""What the server's sessions do during a benchmark: running, waiting on a lock, or waiting on
their client.

Runs the command after ``--`` (another benchmark, typically postgres_throughput.py with one
system and one shape) and samples ``pg_stat_activity`` of the watched database every
--interval seconds until it exits. Each sample of each client session counts once, as one of:

* ``running``: executing, not waiting;
* ``lock: <kind>``: waiting for a heavyweight lock (a row another transaction holds shows as
  ``transactionid`` or ``tuple``; fairq's queue locks as ``advisory``);
* ``lwlock``, ``io``, ``other wait``: waiting inside the server;
* ``client``: idle or idle in transaction, waiting for its client (the worker's own CPU, the
  network, a job running, or a pooled connection unused): not counted in the table.

Only snapshots in which at least one session is in the server count (the workers' start-up is
left out as far as it leaves the server idle; the enqueue is not). The table says where the
sessions' time inside the server goes: a share of
``lock`` waits that rises with the number of workers is a drain bounded by contention, not CPU.

    benchmarks/peers_pg/.venv/bin/python benchmarks/postgres_waits.py -- \\
        benchmarks/peers_pg/.venv/bin/python benchmarks/postgres_throughput.py \\
        --jobs 20000 --runs 1 --shapes 4x10 --systems fairq
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter

import psycopg

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/fairq_bench"
SAMPLE = """
SELECT state, wait_event_type, wait_event FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = %(db)s
"""


def classify(state: str | None, wait_type: str | None, wait: str | None) -> str:
    if state != "active":
        return "client"
    if wait_type is None:
        return "running"
    if wait_type == "Lock":
        return f"lock: {wait}"
    if wait_type == "LWLock":
        return "lwlock"
    if wait_type == "IO":
        return "io"
    if wait_type == "Client":
        return "client"
    return "other wait"


def sample(admin: str, db: str, interval: float, child: subprocess.Popen[bytes]) -> Counter[str]:
    seen: Counter[str] = Counter()
    with psycopg.connect(admin, autocommit=True) as conn:
        while child.poll() is None:
            rows = conn.execute(SAMPLE, {"db": db}).fetchall()
            kinds = [classify(*row) for row in rows]
            if any(kind != "client" for kind in kinds):
                seen.update(kinds)
                seen["snapshots"] += 1
            time.sleep(interval)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("FAIRQ_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the benchmark to watch")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the benchmark to watch after --, e.g. -- python postgres_throughput.py")
    db = args.url.rsplit("/", 1)[-1].split("?")[0]
    admin = args.url.rsplit("/", 1)[0] + "/postgres"
    child = subprocess.Popen(command)
    try:
        seen = sample(admin, db, args.interval, child)
    finally:
        child.wait()
    samples = seen.pop("snapshots", 0)
    seen.pop("client", None)
    total = sum(seen.values())
    if not total:
        print("no session of database", db, "was seen working: is --url the benchmark's?")
        return child.returncode or 1
    print(
        f"\nsessions of {db!r} in the server: {total / samples:.2f} on average"
        f" over {samples} snapshots"
    )
    print("| in the server | share |\n| --- | ---: |")
    for kind, count in seen.most_common():
        print(f"| {kind} | {count / total:.0%} |")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
