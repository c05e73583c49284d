"""End-to-end no-op jobs per second on SQLite with real worker processes.

Each run: a fresh SQLite file; N no-op jobs (over 10 tenants) enqueued in one ``enqueue_many``;
then ``fairq worker fairq.demo.jobs:app --burst`` processes drain them. Prints enqueue jobs/s
and drain jobs/s per run and the median of the runs.

Drain jobs/s is measured from the store's own timestamps (first job started to last job
finished), so worker start-up (interpreter and imports) is not counted; the wall time from
starting the workers to their exit is printed beside it.

    python benchmarks/e2e_throughput.py --jobs 10000 --runs 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fairq.app import App, Call, Options
from fairq.contract import GetJobsParams
from fairq.demo.jobs import NOOP, make_app
from fairq.demo.workers import start_workers
from fairq.job import JobState
from fairq.worker.worker import DEFAULT_CONCURRENCY

QUEUE = "bench"
TENANTS = 10
CHUNK = 500


@dataclass(frozen=True)
class RunResult:
    enqueue_per_s: float
    drain_per_s: float
    drain_wall_s: float


def run_once(jobs: int, processes: int, concurrency: int) -> RunResult:
    work_dir = Path(tempfile.mkdtemp(prefix="fairq-bench-"))
    url = f"sqlite:///{work_dir / 'bench.db'}"
    app = make_app(url)
    try:
        app.stats()  # open (and create) the store before timing
        calls = [
            Call(NOOP, (), {}, Options(tenant=f"tenant-{i % TENANTS}", queue=QUEUE))
            for i in range(jobs)
        ]
        began = time.perf_counter()
        ids = app.enqueue_many(calls)
        enqueue_s = time.perf_counter() - began
        began = time.perf_counter()
        workers = start_workers(
            processes, "fairq.demo.jobs:app", url, QUEUE, concurrency, work_dir, burst=True
        )
        workers.wait(timeout=600)
        wall = time.perf_counter() - began
        first, last = _span(app, ids)
        return RunResult(jobs / enqueue_s, jobs / max(last - first, 1e-9), wall)
    finally:
        app.close()
        shutil.rmtree(work_dir, ignore_errors=True)


def _span(app: App, ids: list[str]) -> tuple[float, float]:
    """First start and last finish over all jobs; every job must have succeeded."""
    first, last, done = float("inf"), 0.0, 0
    for i in range(0, len(ids), CHUNK):
        for job in app.backend.get_jobs(GetJobsParams(ids=ids[i : i + CHUNK])):
            if job.state is JobState.SUCCEEDED and job.started_at and job.finished_at:
                first, last, done = min(first, job.started_at), max(last, job.finished_at), done + 1
    if done != len(ids):
        raise SystemExit(f"only {done} of {len(ids)} jobs succeeded")
    return first, last


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per run (default 10000)")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="jobs at once per process"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.runs < 1:
        parser.error("--jobs and --runs must be at least 1")
    print(
        f"fairq e2e throughput: SQLite, {args.jobs} no-op jobs, {args.processes} worker "
        f"processes x {args.concurrency}, {args.runs} runs (python {sys.version.split()[0]})"
    )
    results = []
    for n in range(1, args.runs + 1):
        r = run_once(args.jobs, args.processes, args.concurrency)
        results.append(r)
        print(
            f"  run {n}: enqueue {r.enqueue_per_s:9,.0f} jobs/s   drain {r.drain_per_s:7,.0f} "
            f"jobs/s   (workers' wall time {r.drain_wall_s:.2f} s)"
        )
    print(
        f"median:  enqueue {statistics.median(r.enqueue_per_s for r in results):9,.0f} jobs/s"
        f"   drain {statistics.median(r.drain_per_s for r in results):7,.0f} jobs/s"
    )


if __name__ == "__main__":
    main()
