"""Throughput on PostgreSQL: fairq vs pgqueuer vs procrastinate, measured in one run.

Each system gets N no-op jobs enqueued (its own batch API), then W worker processes of its
standard worker drain them, each with C jobs in flight (pgqueuer: batches of C); the clock
runs from the first finished job to the last, so the workers' start-up is not counted (as
benchmarks/redis_throughput.py does). fairq runs with fairness on: jobs are spread over
--tenants tenants and every dequeue picks the fairest tenant. Every run starts from a freshly
created database. The shapes W x C (--shapes) run one after another, the systems alternated
within each; for each it prints the median jobs/s over --runs runs, the same-run ratios to the
first system, and CPU per job of the workers and of the server processes over the same span.
The default shapes are 1 x 1 and 2 x 1 (a few processes with one slot each, where every job is
one call) and 2 x 10. --queues N spreads fairq's jobs over N queues (every tenant in each);
with --dedicated, worker i serves queue i only, so dispatches of different queues run side by
side where those of one queue take turns on its lock.

Setup (once): bash benchmarks/peers_pg/setup.sh
Run:          benchmarks/peers_pg/.venv/bin/python benchmarks/postgres_throughput.py
The server is $FAIRQ_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/...);
the benchmark creates and drops the database named in it (default fairq_bench).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

HERE = Path(__file__).resolve().parent
APPS = HERE / "peers_pg"
BIN = Path(sys.executable).parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/fairq_bench"


@dataclass
class Result:
    system: str
    enqueue_s: float
    drain_s: float  # from the first finished job to the last
    jobs: int  # the jobs finished in that span
    client_cpu_s: float  # the worker processes' CPU time in that span
    server_cpu_s: float  # the CPU time of the database's server processes in that span

    @property
    def rate(self) -> float:
        return self.jobs / self.drain_s


def admin_url(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/postgres"))


def fresh_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url(url), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of live processes (all their threads), from /proc/<pid>/stat."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone: its CPU time is lost (only a process that exited early)
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def server_pids(url: str) -> list[int]:
    """The server processes serving the benchmark's database, but not this query."""
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url(url)) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return [row[0] for row in rows]


def count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM the workers, then SIGKILL those still there after 30 s."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def env(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    return {
        **os.environ,
        # the apps first, then the caller's PYTHONPATH (another checkout of fairq to measure)
        "PYTHONPATH": os.pathsep.join([str(APPS), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "BENCH_DSN": url,
        "FAIRQ_URL": f"{url}?schema=fairq",
        "PGHOST": parts.hostname or "127.0.0.1",
        "PGPORT": str(parts.port or 5432),
        "PGUSER": parts.username or "postgres",
        "PGDATABASE": parts.path.lstrip("/"),
        **({"PGPASSWORD": parts.password} if parts.password else {}),
    }


# -- fairq -------------------------------------------------------------------------------------


def fairq_queues(count: int) -> list[str]:
    """The queues fairq's jobs are spread over: the job's own queue, or q0, q1, … ."""
    return ["default"] if count == 1 else [f"q{n}" for n in range(count)]


def fairq_enqueue(url: str, jobs: int, tenants: int, queues: int = 1) -> None:
    os.environ.update(env(url))
    sys.path.insert(0, str(APPS))
    from apps.fairq_app import app, noop

    names = fairq_queues(queues)  # every tenant has jobs in every queue
    calls = [
        noop.options(queue=names[n // tenants % queues]).call(f"tenant-{n % tenants}", n)
        for n in range(jobs)
    ]
    for start in range(0, jobs, 1000):
        app.enqueue_many(calls[start : start + 1000])
    app.close()


def fairq_workers(args: argparse.Namespace, index: int) -> list[str]:
    queues = fairq_queues(args.queues)
    served = [queues[index % len(queues)]] if args.dedicated else queues
    return [str(BIN / "fairq"), "--log-level", "warning", "worker", "apps.fairq_app:app",
            "--concurrency", str(args.concurrency), "--queues", ",".join(served)]  # fmt: skip


# the jobs succeeded so far: the sum of the tenants' counters (what `fairq stats` reads), a read
# of the few tenant rows per poll (a count(*) of the succeeded jobs would read every one's index
# entry each time: work for the server that is not fairq's)
FAIRQ_DONE = "SELECT coalesce(sum(succeeded), 0) FROM fairq.tenants"


# -- pgqueuer ----------------------------------------------------------------------------------


def pgqueuer_enqueue(url: str, jobs: int, tenants: int) -> None:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    async def run() -> None:
        conn = await asyncpg.connect(url)
        queries = Queries(AsyncpgDriver(conn))
        for start in range(0, jobs, 1000):
            size = min(1000, jobs - start)
            await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
        await conn.close()

    asyncio.run(run())


def pgqueuer_install(url: str) -> None:
    subprocess.run([str(BIN / "pgq"), "install"], env=env(url), check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip


def pgqueuer_workers(args: argparse.Namespace, index: int) -> list[str]:
    return [sys.executable, "-m", "apps.pgqueuer_app", str(args.concurrency)]


PGQUEUER_DONE = "SELECT %d - count(*) FROM pgqueuer"


# -- procrastinate -----------------------------------------------------------------------------


def procrastinate_install(url: str) -> None:
    subprocess.run([str(BIN / "procrastinate"), "--app=apps.procrastinate_app.app", "schema",
                    "--apply"], env=env(url), check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def procrastinate_enqueue(url: str, jobs: int, tenants: int) -> None:
    os.environ.update(env(url))
    sys.path.insert(0, str(APPS))
    from apps.procrastinate_app import app, noop

    with app.open():
        for start in range(0, jobs, 1000):
            noop.batch_defer(*({"n": n} for n in range(start, min(jobs, start + 1000))))


def procrastinate_workers(args: argparse.Namespace, index: int) -> list[str]:
    return [str(BIN / "procrastinate"), "--app=apps.procrastinate_app.app", "worker",
            "--concurrency", str(args.concurrency)]  # fmt: skip


PROCRASTINATE_DONE = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"


@dataclass
class System:
    install: Callable[[str], None] | None
    enqueue: Callable[..., None]
    workers: Callable[[argparse.Namespace, int], list[str]]  # the command of worker i
    done_sql: str


SYSTEMS = {
    "fairq": System(None, fairq_enqueue, fairq_workers, FAIRQ_DONE),
    "pgqueuer": System(pgqueuer_install, pgqueuer_enqueue, pgqueuer_workers, PGQUEUER_DONE),
    "procrastinate": System(
        procrastinate_install, procrastinate_enqueue, procrastinate_workers, PROCRASTINATE_DONE
    ),
}


def available() -> list[str]:
    """The systems this Python can run: fairq always; the peers only in their venv."""
    import importlib.util

    found = ["fairq"]
    found += [name for name in ("pgqueuer", "procrastinate") if importlib.util.find_spec(name)]
    return found


def measure(name: str, args: argparse.Namespace) -> Result:
    system = SYSTEMS[name]
    fresh_database(args.url)
    if system.install is not None:
        system.install(args.url)
    started = time.perf_counter()
    # enqueue in a child process: each library keeps its own connections and event loops
    call = f"{args.url!r}, {args.jobs}, {args.tenants}"
    call += f", queues={args.queues}" if name == "fairq" else ""
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import postgres_throughput as b; "
            f"b.SYSTEMS[{name!r}].enqueue({call})")  # fmt: skip
    # (run from here: from the checkout's root, its fairq would shadow PYTHONPATH's)
    subprocess.run([sys.executable, "-c", code], env=env(args.url), check=True, cwd=HERE)
    enqueue_s = time.perf_counter() - started
    done_sql = system.done_sql % args.jobs if "%d" in system.done_sql else system.done_sql
    procs = [
        subprocess.Popen(
            system.workers(args, index),
            env=env(args.url),
            cwd=APPS,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for index in range(args.workers)
    ]
    try:
        servers: set[int] = set()  # the connections opened while draining

        def wait_for(target: int) -> tuple[float, int]:
            """When the count of finished jobs first reached ``target``, and what it was."""
            while (done := count(args.url, done_sql)) < target:
                if any(proc.poll() is not None for proc in procs):
                    raise RuntimeError(f"a {name} worker exited early")
                servers.update(server_pids(args.url))
                time.sleep(0.02)
            return time.perf_counter(), done

        first, done0 = wait_for(1)
        servers.update(server_pids(args.url))
        client0 = cpu_seconds([proc.pid for proc in procs])
        server0 = {pid: cpu_seconds([pid]) for pid in servers}
        last, _ = wait_for(args.jobs)
        client_cpu = cpu_seconds([proc.pid for proc in procs]) - client0
        server_cpu = sum(max(cpu_seconds([pid]) - server0.get(pid, 0.0), 0.0) for pid in servers)
    finally:
        stop(procs)
    return Result(name, enqueue_s, last - first, args.jobs - done0, client_cpu, server_cpu)


def load() -> str:
    """The machine's load averages (1, 5, 15 min): figures from a shared machine need them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def shape(text: str) -> tuple[int, int]:
    """``WxC``: W worker processes with C jobs in flight each."""
    workers, _, concurrency = text.partition("x")
    try:
        return int(workers), int(concurrency)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"shape {text!r}: write worker processes x jobs in flight, as in 2x10"
        ) from None


def run_shape(names: list[str], args: argparse.Namespace) -> None:
    """Every system, alternated, --runs times at one shape; then the shape's table."""
    results: dict[str, list[Result]] = {name: [] for name in names}
    for run in range(args.runs):
        for name in names:
            result = measure(name, args)
            results[name].append(result)
            print(f"{args.workers}x{args.concurrency} run {run + 1}: {name:14} "
                  f"{result.rate:8.0f} jobs/s (drain {result.drain_s:.2f} s, enqueue "
                  f"{result.enqueue_s:.2f} s; CPU per job: workers "
                  f"{result.client_cpu_s / result.jobs * 1e6:.0f} µs, server "
                  f"{result.server_cpu_s / result.jobs * 1e6:.0f} µs; load {load()})",
                  flush=True)  # fmt: skip
    base = statistics.median(r.rate for r in results[names[0]])
    spread = f", fairq's jobs in {args.queues} queues" if args.queues > 1 else ""
    spread += " (a worker per queue)" if args.dedicated else ""
    print(f"\n{args.jobs} no-op jobs, {args.workers} worker processes x {args.concurrency}, "
          f"median of {args.runs} runs{spread}")  # fmt: skip
    print("| system | jobs/s (median) | runs | vs " + names[0] + " | same-run ratios | "
          "worker CPU µs/job | server CPU µs/job |")  # fmt: skip
    print("| --- | ---: | --- | ---: | --- | ---: | ---: |")
    for name in names:
        rates = [r.rate for r in results[name]]
        median = statistics.median(rates)
        listed = ", ".join(f"{rate:.0f}" for rate in rates)
        client = statistics.median(r.client_cpu_s / r.jobs * 1e6 for r in results[name])
        server = statistics.median(r.server_cpu_s / r.jobs * 1e6 for r in results[name])
        # each run's rate over the first system's in that run (they ran a few seconds apart)
        same = ", ".join(
            f"{r.rate / results[names[0]][n].rate:.2f}" for n, r in enumerate(results[name])
        )
        print(f"| {name} | {median:.0f} | {listed} | {median / base:.2f}x | {same} | "
              f"{client:.0f} | {server:.0f} |", flush=True)  # fmt: skip
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("FAIRQ_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--shapes", type=lambda text: [shape(part) for part in text.split(",")],
        default=[(1, 1), (2, 1), (2, 10)],
        help="worker processes x jobs in flight per worker, one after another (default "
        "1x1,2x1,2x10)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, help="worker processes: one shape, with --concurrency"
    )
    parser.add_argument("--concurrency", type=int, help="jobs in flight per worker (default 10)")
    parser.add_argument("--tenants", type=int, default=10, help="fairq tenants (fairness on)")
    parser.add_argument(
        "--queues", type=int, default=1,
        help="fairq queues the jobs are spread over (each tenant has jobs in each); every "
        "worker serves all of them unless --dedicated",
    )  # fmt: skip
    parser.add_argument(
        "--dedicated", action="store_true",
        help="fairq worker i serves queue i only (queues: dispatches of different queues run "
        "side by side, those of one queue take turns)",
    )  # fmt: skip
    parser.add_argument("--systems", default=",".join(available()))
    args = parser.parse_args()
    names = args.systems.split(",")
    if unknown := [name for name in names if name not in SYSTEMS]:
        parser.error(f"--systems: unknown {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    if missing := [name for name in SYSTEMS if name not in available()]:
        print(f"({', '.join(missing)} missing from this Python: run bash "
              "benchmarks/peers_pg/setup.sh and use benchmarks/peers_pg/.venv/bin/python for "
              "the comparison)", flush=True)  # fmt: skip
        if absent := [name for name in names if name in missing]:
            parser.error(f"--systems names {', '.join(absent)}, not installed in this Python")
    shapes = args.shapes
    if args.workers is not None or args.concurrency is not None:
        shapes = [(args.workers or 2, args.concurrency or 10)]
    for args.workers, args.concurrency in shapes:
        run_shape(names, args)


if __name__ == "__main__":
    main()
