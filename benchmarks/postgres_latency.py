"""fairq on PostgreSQL: dequeue+ack cost as the number of backlogged tenants grows, and the
time from enqueue to start for an idle worker (LISTEN/NOTIFY, not polling).

Run: .venv/bin/python benchmarks/postgres_latency.py
Uses $FAIRQ_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test) and a
schema of its own per measurement, dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import psycopg

from fairq.backends.postgres import PostgresBackend
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, GetJobsParams
from fairq.job import NewJob, encode_payload

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def new_job(tenant: str, now: float, name: str = "task", payload: str = "{}") -> NewJob:
    return NewJob(
        id=uuid.uuid4().hex, name=name, queue="default", tenant=tenant, payload=payload,
        run_at=now, max_attempts=3, lease_timeout=60.0, cost=1.0,
    )  # fmt: skip


def drop(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def cost_per_cycle(url: str, tenants: int, cycles: int) -> tuple[float, float]:
    """Median µs of one dequeue and one ack while ``tenants`` tenants stay backlogged."""
    schema = f"fq_bench_{uuid.uuid4().hex[:8]}"
    backend = PostgresBackend(url, schema=schema)
    try:
        now = time.time()
        per_tenant = cycles // tenants + 2  # every tenant still has work when the timing ends
        for _ in range(per_tenant):
            for start in range(0, tenants, 5_000):
                stop = min(tenants, start + 5_000)
                jobs = [new_job(f"t{n}", now) for n in range(start, stop)]
                backend.enqueue(EnqueueParams(jobs=jobs, now=now))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'ANALYZE "{schema}".tenants')
            conn.execute(f'ANALYZE "{schema}".jobs')
        dequeue_us: list[float] = []
        ack_us: list[float] = []
        for _ in range(cycles):
            started = time.perf_counter()
            (lease,) = backend.dequeue(
                DequeueParams(queues=["default"], worker_id="bench", now=time.time())
            ).leases
            taken = time.perf_counter()
            backend.ack_many(AckManyParams(tokens=[lease.token], now=time.time()))
            done = time.perf_counter()
            dequeue_us.append((taken - started) * 1e6)
            ack_us.append((done - taken) * 1e6)
        return statistics.median(dequeue_us), statistics.median(ack_us)
    finally:
        backend.close()
        drop(url, schema)


APP = """
import os
from fairq.app import App
app = App(os.environ["FAIRQ_URL"])

@app.job(name="noop", tenant="tenant")
def noop(tenant: str) -> None:
    pass
"""


def idle_latency(url: str, samples: int) -> list[float]:
    """ms from enqueue (producer's clock) to start (worker's dequeue), one job at a time."""
    schema = f"fq_bench_{uuid.uuid4().hex[:8]}"
    backend = PostgresBackend(url, schema=schema)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "latencyapp.py").write_text(textwrap.dedent(APP))
        path = os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "FAIRQ_URL": f"{url}?schema={schema}", "PYTHONPATH": path}
        command = [sys.executable, "-c", "from fairq.cli import main; main()",
                   "--log-level", "warning", "worker", "latencyapp:app", "-c", "4"]  # fmt: skip
        worker = subprocess.Popen(command, cwd=tmp, env=env)
        try:
            ids = []
            for _ in range(samples + 5):
                time.sleep(0.05)  # let the worker go idle (back into its LISTEN wait)
                job = new_job("t", time.time(), "noop", encode_payload(["t"], {}))
                backend.enqueue(EnqueueParams(jobs=[job], now=job.run_at))
                ids.append(job.id)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                infos = backend.get_jobs(GetJobsParams(ids=ids))
                if all(info.started_at is not None for info in infos):
                    break
                time.sleep(0.05)
            infos = backend.get_jobs(GetJobsParams(ids=ids))[
                5:
            ]  # the first few include the worker's start-up
            return sorted(((info.started_at or 0.0) - info.enqueued_at) * 1000 for info in infos)
        finally:
            worker.terminate()
            worker.wait(30)
            backend.close()
            drop(url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("FAIRQ_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--tenants", default="10,1000,100000")
    parser.add_argument("--cycles", type=int, default=2_000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    print("| backlogged tenants | dequeue µs (median) | ack µs (median) |")
    print("| ---: | ---: | ---: |")
    for tenants in (int(t) for t in args.tenants.split(",")):
        dequeue_us, ack_us = cost_per_cycle(args.url, tenants, args.cycles)
        print(f"| {tenants:,} | {dequeue_us:.0f} | {ack_us:.0f} |", flush=True)
    latencies = idle_latency(args.url, args.samples)
    p50 = statistics.median(latencies)
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"\nidle enqueue→start over {len(latencies)} jobs: p50 {p50:.2f} ms, "
          f"p95 {p95:.2f} ms, p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
