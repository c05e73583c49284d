"""What metrics cost a worker: the drain of no-op jobs on Redis, without and with Prometheus.

Each round enqueues N no-op jobs (over 10 tenants), then one ``fairq worker --burst`` process
drains them: as it is (the job log only, the default), and with ``--metrics-port 0`` (the
Prometheus plug-in: every job counted and timed, every store call timed). The variants
alternate, so both see the same machine load; for each, the worker's CPU per job (user+system,
from ``os.wait4``) and its drain rate, start-up and shut-down subtracted (a run with no job).
The design's budget: metrics and the seam cost at most 5 %.

    BENCH_REDIS_URL=redis://127.0.0.1:6379/13 .venv/bin/python benchmarks/seam_cost.py
    .venv/bin/python benchmarks/seam_cost.py --jobs 20000 --rounds 5

To compare the default worker with another checkout (e.g. before the seam), run
``benchmarks/worker_cpu.py`` with ``PYTHONPATH=<that checkout>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fairq.app import Call, Options
from fairq.demo.jobs import NOOP, make_app

QUEUE = "bench"
TENANTS = 10
BATCH = 1000
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
VARIANTS = {"default": [], "prometheus": ["--metrics-port", "0"]}


@dataclass
class Run:
    cpu: float  # seconds, user + system
    wall: float  # seconds


def reset() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def enqueue(url: str, jobs: int) -> None:
    app = make_app(url)
    try:
        for start in range(0, jobs, BATCH):
            app.enqueue_many(
                Call(NOOP, (), {}, Options(tenant=f"tenant-{i % TENANTS}", queue=QUEUE))
                for i in range(start, min(jobs, start + BATCH))
            )
    finally:
        app.close()


def drain(url: str, extra: list[str], concurrency: int, cwd: Path) -> Run:
    """One burst worker process, start to exit (run in ``cwd``: see worker_cpu.py)."""
    command = [
        sys.executable, "-m", "fairq", "--log-level", "warning",
        "worker", "fairq.demo.jobs:app", "--url", url, "--queues", QUEUE,
        "--concurrency", str(concurrency), "--burst", *extra,
    ]  # fmt: skip
    out = subprocess.DEVNULL
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=out, stdout=out, stderr=out, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the worker exited with {os.waitstatus_to_exitcode(status)}")
    return Run(cpu=usage.ru_utime + usage.ru_stime, wall=wall)


def measure(url: str, jobs: int, extra: list[str], concurrency: int, cwd: Path) -> Run:
    """CPU microseconds per job and jobs/s of one drain, start-up and shut-down subtracted."""
    reset()
    enqueue(url, 1)
    base = drain(url, extra, concurrency, cwd)
    enqueue(url, jobs)
    busy = drain(url, extra, concurrency, cwd)
    return Run(cpu=(busy.cpu - base.cpu) / jobs * 1e6, wall=jobs / (busy.wall - base.wall))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds; medians are reported")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    url = f"{REDIS_URL}?prefix=seamcost"
    print(
        f"seam cost: Redis, {args.jobs} no-op jobs, 1 worker process x {args.concurrency}, "
        f"{args.rounds} rounds (variants alternate)"
    )
    found: dict[str, list[Run]] = {name: [] for name in VARIANTS}
    work_dir = Path(tempfile.mkdtemp(prefix="fairq-seam-"))
    try:
        for n in range(1, args.rounds + 1):
            order = list(VARIANTS) if n % 2 else list(reversed(VARIANTS))
            for name in order:
                run = measure(url, args.jobs, VARIANTS[name], args.concurrency, work_dir)
                found[name].append(run)
                print(f"  round {n} {name:10} {run.cpu:6.1f} us CPU/job {run.wall:8.0f} jobs/s")
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        reset()
    cpu = {name: statistics.median(r.cpu for r in runs) for name, runs in found.items()}
    rate = {name: statistics.median(r.wall for r in runs) for name, runs in found.items()}
    for name in VARIANTS:
        print(f"median {name:10} {cpu[name]:6.1f} us CPU/job {rate[name]:8.0f} jobs/s")
    print(
        f"prometheus / default: CPU per job {cpu['prometheus'] / cpu['default']:.3f}x, "
        f"drain rate {rate['prometheus'] / rate['default']:.3f}x (budget: 5 %)"
    )


if __name__ == "__main__":
    main()
