"""What a fairq drain on Redis costs per job: calls, Redis CPU and the workers' CPU.

N no-op jobs (10 tenants, the throughput benchmark's job, which does one ``INCR``) are
enqueued in batches, then two ``fairq worker`` processes drain them. Around the drain it reads
Redis's ``INFO`` CPU and ``commandstats`` and each worker's CPU time from ``/proc``, and prints
one line per run: drain jobs/s, ``FCALL``s per job, Redis CPU µs per job, workers' CPU µs per
job. CPU per job and calls per job move far less with the machine's load than jobs/s, so two
versions of the worker can be compared by alternating them (``PYTHONPATH=<other checkout>``).
``--job empty`` drains jobs that do nothing (their completions read from fairq's counters):
what fairq itself costs, without the ``INCR``.

    FAIRQ_BENCH_REDIS_URL=redis://127.0.0.1:6392/0 .venv/bin/python benchmarks/redis_drain_cost.py
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _drive import counter, done_count, running, wait_done  # noqa: E402
from redis_jobs import app, empty, noop  # noqa: E402
from redis_throughput import fairq_enqueue_batched  # noqa: E402


def processes_cpu(pids: list[int]) -> float:
    """User + system CPU seconds of the processes (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run(n: int, concurrency: int, job: str) -> str:
    client = counter()
    client.flushdb()
    app.publish()
    fairq_enqueue_batched(n, empty if job == "empty" else noop)
    client.config_resetstat()
    redis_cpu = lambda: sum(client.info("cpu")[k] for k in ("used_cpu_sys", "used_cpu_user"))  # noqa: E731
    if job == "empty":
        count = lambda: sum(row.succeeded for row in app.stats())  # noqa: E731
    else:
        count = lambda: done_count(client)  # noqa: E731
    command = [sys.executable, "-m", "fairq", "worker", "redis_jobs:app",
               "--concurrency", str(concurrency)]  # fmt: skip
    with running([command, command], HERE) as pids:
        redis0, workers0 = redis_cpu(), processes_cpu(pids)
        first, done0 = wait_done(count, 1)
        last, _ = wait_done(count, n)
        redis1, workers1 = redis_cpu(), processes_cpu(pids)
    fcalls = client.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0)
    per_job = lambda seconds: 1e6 * seconds / n  # noqa: E731
    return (
        f"drain {(n - done0) / (last - first):,.0f} jobs/s, {fcalls / n:.3f} FCALLs per job, "
        f"Redis CPU {per_job(redis1 - redis0):.0f} µs per job, "
        f"workers' CPU {per_job(workers1 - workers0):.0f} µs per job"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="jobs in flight per process")
    parser.add_argument(
        "--job", choices=["incr", "empty"], default="incr", help="the benchmarks' job or none"
    )
    args = parser.parse_args()
    for number in range(1, args.runs + 1):
        print(f"run {number}: {run(args.n, args.concurrency, args.job)}", flush=True)


if __name__ == "__main__":
    main()
