"""Does dequeue+ack on SQLite stay flat as the number of backlogged tenants grows?

For 10, 1,000 and 100,000 tenants, each with a backlog, time dequeue followed by ack (one
job, one transaction each) on a temporary file, and print µs per pair (p50, p99, mean) and the
ratio of the largest to the smallest. The budget (docs/benchmarks.md) is O(log T): flat within
about 2x.

    python benchmarks/sqlite_scaling.py           # 5,000 timed pairs per size
    python benchmarks/sqlite_scaling.py --quick   # 500 timed pairs per size
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams
from fairq.job import NewJob
from fairq.policy.metrics import percentile

SIZES = (10, 1_000, 100_000)
WARMUP = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed pairs, for CI")
    args = parser.parse_args()
    pairs = 500 if args.quick else 5_000
    print(f"dequeue+ack on SQLite, {pairs} timed pairs per size (after {WARMUP} warm-up)")
    print(f"{'tenants':>9} {'jobs':>9} {'setup s':>8} {'p50 µs':>8} {'p99 µs':>8} {'mean µs':>8}")
    rows: dict[int, dict[str, float]] = {}
    for tenants in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            row = rows[tenants] = measure(Path(tmp) / "bench.db", tenants, pairs)
        print(
            f"{tenants:>9,} {row['jobs']:>9,.0f} {row['setup']:>8.1f} "
            f"{row['p50']:>8.0f} {row['p99']:>8.0f} {row['mean']:>8.0f}"
        )
    for figure in ("p50", "mean"):
        ratio = rows[SIZES[-1]][figure] / rows[SIZES[0]][figure]
        verdict = "flat (within 2x)" if ratio <= 2 else "NOT flat (over 2x)"
        print(f"{figure} ratio {SIZES[-1]:,} / {SIZES[0]:,} tenants: {ratio:.2f}x, {verdict}")
    print("p99 and mean are set by occasional I/O stalls (WAL checkpoint fsync), not by T.")


def measure(path: Path, tenants: int, pairs: int) -> dict[str, float]:
    backend = SQLiteBackend(path)
    try:
        per_tenant = max(2, -(-(pairs + WARMUP) // tenants) + 1)
        started = time.perf_counter()
        backend.enqueue(EnqueueParams(jobs=list(backlog(tenants, per_tenant)), now=0.0))
        setup = time.perf_counter() - started
        samples = [one_pair(backend, i) for i in range(WARMUP + pairs)][WARMUP:]
    finally:
        backend.close()
    return {
        "jobs": tenants * per_tenant,
        "setup": setup,
        "p50": percentile(samples, 50),
        "p99": percentile(samples, 99),
        "mean": statistics.fmean(samples),
    }


def backlog(tenants: int, per_tenant: int) -> list[NewJob]:
    return [
        NewJob(
            id=f"t{t}-{n}",
            name="noop",
            queue="default",
            tenant=f"tenant-{t}",
            payload='{"args":[],"kwargs":{}}',
            run_at=0.0,
            max_attempts=3,
            lease_timeout=3600.0,
            cost=1.0,
        )
        for n in range(per_tenant)
        for t in range(tenants)
    ]


def one_pair(backend: SQLiteBackend, i: int) -> float:
    """µs for one dequeue and the ack of the job it gave."""
    now = 1.0 + i * 0.001
    started = time.perf_counter()
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="bench", now=now)).leases
    backend.ack_many(AckManyParams(tokens=[lease.token], now=now + 0.0005))
    return (time.perf_counter() - started) * 1e6


if __name__ == "__main__":
    main()
