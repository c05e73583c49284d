"""How long ``fairq simulate --from`` takes to replay a large recorded window, and its memory.

The budget (issue #33): 1,000,000 recorded jobs replayed under 60 s. A SQLite store is filled
first (once, kept at --store) by the store's own scheduler on a virtual clock in steps of
0.1 s: a batch of arrivals each second, and at each step the runs that end acked (run times
0.1 to 1.0 s) and the idle workers of --workers handed jobs. Then, timed, in one process:
the window read from the store (``Backend.history``, pages of 10,000), and the replay that
``fairq simulate --from`` runs with no change: the actual run's figures and the as-is replay
on the same pool. Peak memory is the
process's maximum resident set (the store's filling runs in a child process, not counted).
Wall time and CPU time are both printed: on a shared machine the CPU time is the steadier.

    .venv/bin/python benchmarks/replay_scale.py                      # 1,000,000 jobs
    .venv/bin/python benchmarks/replay_scale.py --jobs 100000 --store /tmp/replay-100k.db
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing
import pstats
import random
import resource
import time
from pathlib import Path

from fairq.backends.clock import Clock
from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams
from fairq.job import NewJob
from fairq.sim import whatif
from fairq.sim.replay import read_history

QUEUE = "imports"


def fill(path: Path, jobs: int, tenants: int, workers: int) -> None:
    """Record ``jobs`` jobs at 90 % load on ``workers`` workers, run by the store itself in
    steps of 0.1 s: each step acks the runs that end then and hands the idle workers jobs."""
    rng = random.Random(1)
    store = SQLiteBackend(path, clock=Clock.CALLER)
    per_tick = 0.9 * workers / 0.55  # a new batch each second; mean run time 0.55 s
    made = waiting = step = 0
    ending: dict[int, list[str]] = {}  # step -> tokens of the runs that end then
    idle = workers
    while made < jobs or waiting or ending:
        now = step / 10
        if step % 10 == 0 and made < jobs:
            count = min(jobs - made, int(rng.expovariate(1 / per_tick)))
            if count:
                store.enqueue(
                    EnqueueParams(
                        jobs=[_job(made + n, rng, tenants) for n in range(count)], now=now
                    )
                )
            made, waiting = made + count, waiting + count
        done = ending.pop(step, [])
        if done:
            store.ack_many(AckManyParams(tokens=done, now=now))
            idle += len(done)
        if idle and waiting:
            leases = store.dequeue(
                DequeueParams(queues=[QUEUE], worker_id="w", now=now, limit=idle)
            ).leases
            for lease in leases:
                ending.setdefault(step + rng.randint(1, 10), []).append(lease.token)
            idle, waiting = idle - len(leases), waiting - len(leases)
        step += 1
        if step % 20_000 == 0:
            print(f"  filling: {made:,} jobs enqueued, {now:,.0f} s", flush=True)
    store.close()


def _job(n: int, rng: random.Random, tenants: int) -> NewJob:
    """A job of one of three kinds, for a tenant drawn from a long-tailed distribution."""
    return NewJob(
        id=f"j{n}",
        name=f"kind-{n % 3}",
        queue=QUEUE,
        tenant=f"t{int(rng.paretovariate(1.2)) % tenants:05d}",
        payload="{}",
        run_at=0.0,
        max_attempts=1,
        lease_timeout=60.0,
        cost=0.5,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=1_000)
    parser.add_argument("--workers", type=int, default=256)
    parser.add_argument("--store", type=Path, default=Path("/tmp/fairq-replay-1m.db"))
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25")
    args = parser.parse_args()
    if not args.store.exists():
        started = time.perf_counter()
        child = multiprocessing.Process(
            target=fill, args=(args.store, args.jobs, args.tenants, args.workers)
        )
        child.start()
        child.join()
        print(f"filled {args.store} in {time.perf_counter() - started:.0f} s")
    store = SQLiteBackend(args.store)
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    started, cpu = time.perf_counter(), time.process_time()
    recorded = read_history(store, QUEUE, 0.0, 1e12)
    read, read_cpu = time.perf_counter() - started, time.process_time() - cpu
    read_peak = _peak()
    runs = whatif.replay(recorded, whatif.Changes(), ["fairq"])
    total, total_cpu = time.perf_counter() - started, time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    recorded.close()
    store.close()
    found = whatif.fidelity(runs[0], runs[1])
    print(
        f"{recorded.count:,} jobs of {len(recorded.weights):,} tenants, "
        f"{recorded.workers()} workers: read {read:.1f} s ({read_cpu:.1f} s CPU), "
        f"read + replay {total:.1f} s ({total_cpu:.1f} s CPU; budget 60 s), "
        f"peak memory {read_peak:,.0f} MiB after the read, {_peak():,.0f} MiB in all"
    )
    if found is not None:
        print(f"fidelity of the as-is replay: error {found.error:.1%}")


def _peak() -> float:
    """The process's largest resident set so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
