"""What metrics cost a worker: the drain of no-op jobs on Redis, without and with Prometheus.

Each round enqueues N no-op jobs (over 10 tenants), then one ``fairq worker --burst`` process
drains them: as it is (the job log only, the default), and with ``--metrics-port 0`` (the
Prometheus plug-in: every job counted and timed, every store call timed). The variants
alternate, so both see the same machine load; for each, the worker's CPU per job (user+system,
from ``os.wait4``) and its drain rate, start-up and shut-down subtracted (a run with no job).
The design's budget: metrics and the seam cost at most 5 %.

    FAIRQ_BENCH_REDIS_URL=redis://127.0.0.1:6379/13 .venv/bin/python benchmarks/seam_cost.py
    .venv/bin/python benchmarks/seam_cost.py --jobs 20000 --rounds 5

On a shared machine CPU time moves with the others' load. Two counts it does not move:
``--callgrind`` counts the worker's instructions (valgrind; slow: use fewer jobs; how jobs
batch still varies with timing), ``--calls`` the Python function calls per job (a profile
hook on every thread of an in-process worker), the unit the seam's hooks cost in.
``--baseline PATH`` adds a third variant: the default worker of another checkout (e.g. the
commit before the seam), to see what the seam costs when no plug-in is added:

    .venv/bin/python benchmarks/seam_cost.py --callgrind --jobs 3000 --rounds 1 \
        --baseline /path/to/older/checkout
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from fairq.app import Call, Options
from fairq.demo.jobs import NOOP, make_app

QUEUE = "bench"
TENANTS = 10
BATCH = 1000
REDIS_URL = (
    os.environ.get("FAIRQ_BENCH_REDIS_URL")
    or os.environ.get("BENCH_REDIS_URL")  # its old name, read until the next release
    or "redis://127.0.0.1:6379/13"
)
VARIANTS = {"default": [], "prometheus": ["--metrics-port", "0"]}


@dataclass
class Variant:
    name: str
    extra: list[str]  # fairq worker options
    pythonpath: str | None = None  # another checkout's fairq


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


def drain(url: str, variant: Variant, concurrency: int, cwd: Path, callgrind: bool) -> Run:
    """One burst worker process, start to exit (run in ``cwd``: see worker_cpu.py). With
    ``callgrind``, ``cpu`` is the instructions it executed."""
    command = [
        sys.executable, "-m", "fairq", "--log-level", "warning",
        "worker", "fairq.demo.jobs:app", "--url", url, "--queues", QUEUE,
        "--concurrency", str(concurrency), "--burst", *variant.extra,
    ]  # fmt: skip
    counts = cwd / "callgrind.out"
    if callgrind:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={counts}", *command]
    env = dict(os.environ)
    if variant.pythonpath is not None:
        env["PYTHONPATH"] = variant.pythonpath
    out = subprocess.DEVNULL
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=out, stdout=out, stderr=out, cwd=cwd, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the worker exited with {os.waitstatus_to_exitcode(status)}")
    if callgrind:
        found = re.search(r"^summary: (\d+)", counts.read_text(), re.MULTILINE)
        assert found is not None, "no summary in callgrind's output"
        counts.unlink()
        return Run(cpu=float(found.group(1)), wall=wall)
    return Run(cpu=usage.ru_utime + usage.ru_stime, wall=wall)


def measure(
    url: str, jobs: int, variant: Variant, concurrency: int, cwd: Path, callgrind: bool
) -> Run:
    """CPU microseconds (or instructions) per job and jobs/s of one drain, start-up and
    shut-down subtracted."""
    reset()
    enqueue(url, 1)
    base = drain(url, variant, concurrency, cwd, callgrind)
    enqueue(url, jobs)
    busy = drain(url, variant, concurrency, cwd, callgrind)
    scale = 1.0 if callgrind else 1e6
    return Run(cpu=(busy.cpu - base.cpu) / jobs * scale, wall=jobs / (busy.wall - base.wall))


def count_calls(url: str, jobs: int, concurrency: int, prometheus: bool) -> None:
    """(In a child process.) Drain ``jobs`` in this process, counting the Python calls of every
    thread; prints calls per job."""
    from fairq.worker import Worker

    reset()
    enqueue(url, jobs)
    app = make_app(url)
    if prometheus:
        from prometheus_client import CollectorRegistry

        from fairq.instrument.prometheus import PrometheusMetrics

        app.add_middleware(PrometheusMetrics(CollectorRegistry()))
    worker = Worker(app, queues=QUEUE, concurrency=concurrency, burst=True)
    calls = [0]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls[0] += 1  # under the GIL; a lost count now and then is noise

    threading.setprofile(profile)
    sys.setprofile(profile)
    worker.run()
    sys.setprofile(None)
    threading.setprofile(None)
    app.close()
    print(calls[0] / jobs)


def calls_of(url: str, jobs: int, variant: Variant, concurrency: int, cwd: Path) -> Run:
    command = [sys.executable, str(Path(__file__).resolve()), "--child-calls"]
    command += ["--jobs", str(jobs), "--concurrency", str(concurrency)]
    if variant.extra:
        command.append("--prometheus")
    env = dict(os.environ, FAIRQ_BENCH_REDIS_URL=REDIS_URL)
    if variant.pythonpath is not None:
        env["PYTHONPATH"] = variant.pythonpath
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return Run(cpu=float(done.stdout.split()[-1]), wall=0.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds; medians are reported")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--callgrind", action="store_true", help="count instructions")
    parser.add_argument("--baseline", metavar="PATH", help="another checkout's default worker")
    parser.add_argument(
        "--skip-prometheus", action="store_true", help="only the default (and the baseline)"
    )
    parser.add_argument("--calls", action="store_true", help="count Python calls per job")
    parser.add_argument("--child-calls", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prometheus", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    url = f"{REDIS_URL}?prefix=seamcost"
    if args.child_calls:
        count_calls(url, args.jobs, args.concurrency, args.prometheus)
        return
    variants = [Variant(name, extra) for name, extra in VARIANTS.items()]
    if args.skip_prometheus:
        variants = variants[:1]
    if args.baseline:
        variants.insert(0, Variant("baseline", [], str(Path(args.baseline).resolve())))
    unit = "instructions/job" if args.callgrind else "calls/job" if args.calls else "us CPU/job"
    print(
        f"seam cost: Redis, {args.jobs} no-op jobs, 1 worker process x {args.concurrency}, "
        f"{args.rounds} rounds (variants alternate), {unit}"
    )
    found: dict[str, list[Run]] = {v.name: [] for v in variants}
    work_dir = Path(tempfile.mkdtemp(prefix="fairq-seam-"))
    try:
        for n in range(1, args.rounds + 1):
            for variant in variants if n % 2 else list(reversed(variants)):
                if args.calls:
                    run = calls_of(url, args.jobs, variant, args.concurrency, work_dir)
                else:
                    run = measure(
                        url, args.jobs, variant, args.concurrency, work_dir, args.callgrind
                    )
                found[variant.name].append(run)
                print(f"  round {n} {variant.name:10} {run.cpu:9.1f} {unit}{_rate(run.wall)}")
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        reset()
    cpu = {name: statistics.median(r.cpu for r in runs) for name, runs in found.items()}
    rate = {name: statistics.median(r.wall for r in runs) for name, runs in found.items()}
    for name in found:
        print(f"median {name:10} {cpu[name]:9.1f} {unit}{_rate(rate[name])}")
    pairs = [] if args.skip_prometheus else [("prometheus", "default")]
    pairs += [("default", "baseline")] if args.baseline else []
    for one, other in pairs:
        drain = f", drain rate {rate[one] / rate[other]:.3f}x" if rate[other] else ""
        print(f"{one} / {other}: {unit} {cpu[one] / cpu[other]:.3f}x{drain} (budget: 5 %)")


def _rate(jobs_per_second: float) -> str:
    return f" {jobs_per_second:8.0f} jobs/s" if jobs_per_second else ""


if __name__ == "__main__":
    main()
