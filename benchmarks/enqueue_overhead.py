"""fairq's own client cost of one ``job.enqueue(tenant, n)`` call: the App layer, store excluded.

The App layer is everything between ``job.enqueue`` and the store's ``enqueue`` (declaration,
argument checks, tenant, payload, the ``NewJob``, hooks, the sans-I/O driver); it is the same
code for every store. Each store is wrapped so the time inside its ``enqueue`` is measured and
subtracted: what is left is the App layer's per call.

Three measures, each over 10 tenants and a job declared ``@app.job(name="noop",
tenant="tenant")`` over ``def noop(tenant: str, n: int)``:

* plain timing: µs per call, all in and App layer, on a null store (no store at all: the App
  layer alone), SQLite (a temporary file) and PostgreSQL; the stores alternated round by round
  so the load falls on all alike; the median of the rounds and the load average printed;
* cProfile on the null store: function calls per enqueue (load-independent), µs per call under
  the profiler, and the App layer's costliest functions;
* cProfile on SQLite and PostgreSQL: µs per call under the profiler, all in and App layer;
* with ``--instructions`` (valgrind installed): instructions per call of the App layer on the
  null store, counted by callgrind (load-independent): N and then 2N calls, each in a process
  of its own, the difference over N (Python's start and imports cancel out).

    .venv/bin/python benchmarks/enqueue_overhead.py [--calls 2000] [--rounds 5] [--instructions]
    FAIRQ_BENCH_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/bench_app \\
        .venv/bin/python benchmarks/enqueue_overhead.py --stores null,sqlite,postgres

PostgreSQL gets a fresh schema in the database named (created if missing), dropped after.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from fairq import App
from fairq.backends import open_backend
from fairq.contract import EnqueueParams, EnqueueResult, JobType

POSTGRES = os.environ.get(
    "FAIRQ_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/fairq_bench"
)
TENANTS = 10


class NullStore:
    """A store that keeps nothing: the App layer alone."""

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        return EnqueueResult(queues=[job.queue for job in params.jobs])

    def job_types(self) -> dict[str, JobType]:
        return {}

    def close(self) -> None:
        pass


class StoreTimer:
    """A store whose ``enqueue`` adds its wall time to ``spent``; the rest passes through."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spent = 0.0

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        started = time.perf_counter()
        try:
            result: EnqueueResult = self.inner.enqueue(params)
            return result
        finally:
            self.spent += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db"
    elif kind == "postgres":
        import psycopg

        base, _, db = POSTGRES.rpartition("/")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db]).fetchone()
            if found is None:
                conn.execute(f'CREATE DATABASE "{db}"')
        schema = f"bench{uuid.uuid4().hex[:8]}"
        try:
            yield f"{POSTGRES}?schema={schema}"
        finally:
            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        yield "memory://"


def make_app(kind: str, url: str) -> tuple[App, StoreTimer, Any]:
    inner: Any = NullStore() if kind == "null" else open_backend(url)
    timer = StoreTimer(inner)
    app = App(url, backend=timer)  # type: ignore[arg-type]  # a Backend by delegation

    @app.job(name="noop", tenant="tenant")
    def noop(tenant: str, n: int) -> None:
        """Does nothing: only its enqueue is measured."""

    noop.enqueue("tenant-0", -1)  # connect, create the schema: before any clock starts
    return app, timer, noop


def timed_round(app: App, timer: StoreTimer, noop: Any, calls: int) -> tuple[float, float]:
    """µs per call: all in, and the App layer (all in minus the store's enqueue)."""
    timer.spent = 0.0
    started = time.perf_counter()
    for n in range(calls):
        noop.enqueue(f"tenant-{n % TENANTS}", n)
    total = time.perf_counter() - started
    return total / calls * 1e6, (total - timer.spent) / calls * 1e6


def profiled(noop: Any, calls: int) -> pstats.Stats:
    profile = cProfile.Profile()
    profile.enable()
    for n in range(calls):
        noop.enqueue(f"tenant-{n % TENANTS}", n)
    profile.disable()
    return pstats.Stats(profile, stream=io.StringIO())


def store_seconds(stats: pstats.Stats) -> float:
    """The cumulative time of ``StoreTimer.enqueue`` under the profiler."""
    return sum(
        entry[3]
        for (path, _, func), entry in stats.stats.items()  # type: ignore[attr-defined]
        if func == "enqueue" and path == __file__
    )


def instructions(calls: int) -> int:
    """Instructions of a process that enqueues ``calls`` jobs on the null store."""
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/cg.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--child", str(calls)],
            check=True, capture_output=True,
        )  # fmt: skip
        with open(out) as f:
            found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.MULTILINE)
    assert found is not None, "no total in callgrind's output"
    return int(found.group(1))


def child(calls: int) -> None:
    app, _, noop = make_app("null", "memory://")
    for n in range(calls):
        noop.enqueue(f"tenant-{n % TENANTS}", n)
    app.close()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stores", default="null,sqlite,postgres")
    parser.add_argument("--top", type=int, default=15, help="functions shown by cProfile")
    parser.add_argument("--instructions", action="store_true", help="count them (callgrind)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # callgrind's process
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child)
    if args.instructions:
        n = args.calls
        once, twice = instructions(n), instructions(2 * n)
        print(f"callgrind: App layer (null store) {(twice - once) / n:,.0f} instructions per call")
    kinds = args.stores.split(",")
    with contextlib.ExitStack() as stack:
        apps = {kind: make_app(kind, stack.enter_context(store_url(kind))) for kind in kinds}
        for app, _, _ in apps.values():
            stack.callback(app.close)

        print(f"plain timing: {args.calls} calls per round, {args.rounds} rounds alternated")
        times: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
        for r in range(args.rounds):
            for kind in kinds:
                app, timer, noop = apps[kind]
                times[kind].append(timed_round(app, timer, noop, args.calls))
            print(f"  round {r + 1}: load {load()}")
        for kind in kinds:
            total = statistics.median(t for t, _ in times[kind])
            layer = statistics.median(a for _, a in times[kind])
            print(f"  {kind:9} all in {total:8.1f} µs/call   App layer {layer:6.1f} µs/call")

        print(f"\ncProfile: {args.calls} calls (load {load()})")
        for kind in kinds:
            app, timer, noop = apps[kind]
            stats = profiled(noop, args.calls)
            total = stats.total_tt  # type: ignore[attr-defined]
            inside = 0.0 if kind == "null" else store_seconds(stats)
            print(f"  {kind:9} all in {total / args.calls * 1e6:8.1f} µs/call   App layer "
                  f"{(total - inside) / args.calls * 1e6:6.1f} µs/call")  # fmt: skip
            if kind == "null":
                calls = stats.total_calls  # type: ignore[attr-defined]
                print(f"            App layer: {calls / args.calls:.1f} function calls per enqueue")
            if kind == "null" and args.top:
                out = io.StringIO()
                stats.stream = out  # type: ignore[attr-defined]
                stats.sort_stats("tottime").print_stats(args.top)
                lines = out.getvalue().splitlines()
                start = next(i for i, line in enumerate(lines) if "ncalls" in line)
                print("\n".join("            " + line for line in lines[start:] if line.strip()))


if __name__ == "__main__":
    main()
