"""Weights at any concurrency, with real worker processes: shares of 1:3:6 at 1 to 32 slots.

Three tenants at weights 1, 3 and 6 are backlogged with jobs that sleep a chosen length (10 ms
each, 2 s each, or a mix drawn from 5 ms to 500 ms); no cost is declared. One
``fairq worker --concurrency P`` process runs them. After a warm-up of 20 finished runs, the
next 300 starts are counted, from the start and end times the store kept for each job: each
tenant's share of those starts and of their worker-seconds, against 10/30/60 %. The same run
with the estimate fixed at the default 1 s (``learn_cost=False``: the scheduler before learned
costs) is printed beside it.

    .venv/bin/python benchmarks/weights_at_slots.py                      # SQLite
    .venv/bin/python benchmarks/weights_at_slots.py --url redis://127.0.0.1:6379/5
    .venv/bin/python benchmarks/weights_at_slots.py --url postgresql://postgres@127.0.0.1/test \\
        --slots 1,4,32 --lengths 10ms,mix

A Redis URL gets a fresh prefix per run, a PostgreSQL URL a fresh schema (dropped after), an
SQLite store a fresh file.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from weights_jobs import declare  # noqa: E402

from fairq import App  # noqa: E402
from fairq.contract import GetJobsParams, StatsParams  # noqa: E402

WEIGHTS = {"t1": 1.0, "t2": 3.0, "t3": 6.0}
WARM_UP = 20
COUNTED = 300


def lengths_of(kind: str, count: int, rng: random.Random) -> list[float]:
    if kind == "10ms":
        return [0.01] * count
    if kind == "2s":
        return [2.0] * count
    return [round(rng.uniform(0.005, 0.5), 3) for _ in range(count)]


def fresh_url(base: str, tmp: Path) -> str:
    if base.startswith("redis"):
        joiner = "&" if "?" in base else "?"
        return f"{base}{joiner}prefix=w{uuid.uuid4().hex[:8]}"
    if base.startswith("postgres"):
        joiner = "&" if "?" in base else "?"
        return f"{base}{joiner}schema=w{uuid.uuid4().hex[:8]}"
    return f"sqlite:///{tmp / f'{uuid.uuid4().hex[:8]}.db'}"


def one_run(base: str, kind: str, slots: int, fixed: bool, tmp: Path) -> dict[str, object]:
    url = fresh_url(base, tmp)
    app = App(url)
    declare(app)
    job = app.jobs["work_fixed" if fixed else "work"]
    for tenant, weight in WEIGHTS.items():
        app.set_tenant("weights", tenant, weight=weight)
    need = WARM_UP + slots + COUNTED
    rng = random.Random(28)
    ids: list[str] = []
    for tenant in WEIGHTS:
        calls = [job.call(tenant, s) for s in lengths_of(kind, need, rng)]
        ids += app.enqueue_many(calls)
    worker = subprocess.Popen(
        [sys.executable, "-m", "fairq", "worker", "weights_jobs:app", "--queues", "weights",
         "--concurrency", str(slots)],
        cwd=HERE, env={**os.environ, "BENCH_FAIRQ_URL": url},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while True:
            done = sum(r.succeeded for r in app.backend.stats(StatsParams(queue="weights")))
            if done >= need + slots:
                break
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited with {worker.returncode}")
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
    jobs = [j for j in app.backend.get_jobs(GetJobsParams(ids=ids)) if j.finished_at]
    jobs.sort(key=lambda j: j.started_at or 0.0)
    ends = sorted(j.finished_at for j in jobs if j.finished_at is not None)
    warm_until = ends[WARM_UP - 1]
    counted = [j for j in jobs if (j.started_at or 0.0) >= warm_until][:COUNTED]
    starts = {t: sum(1 for j in counted if j.tenant == t) for t in WEIGHTS}
    seconds = {
        t: sum((j.finished_at or 0.0) - (j.started_at or 0.0) for j in counted if j.tenant == t)
        for t in WEIGHTS
    }
    total = sum(seconds.values())
    app.close()
    if base.startswith("postgres"):
        _drop_schema(url)
    return {
        "starts": starts,
        "share": {t: seconds[t] / total for t in WEIGHTS},
        "counted": len(counted),
    }


def _drop_schema(url: str) -> None:
    import psycopg

    base, _, query = url.partition("?")
    schema = dict(p.split("=", 1) for p in query.split("&"))["schema"]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="sqlite", help="a Redis or PostgreSQL URL; default SQLite")
    parser.add_argument("--slots", default="1,2,4,8,32")
    parser.add_argument("--lengths", default="10ms,mix", help="of 10ms, 2s, mix")
    parser.add_argument("--no-fixed", action="store_true", help="skip the fixed-estimate runs")
    args = parser.parse_args()
    ideal = {t: w / sum(WEIGHTS.values()) for t, w in WEIGHTS.items()}
    print(f"store: {args.url.split('?')[0]}; weights 1:3:6; {COUNTED} starts after {WARM_UP} runs")
    print(f"{'jobs':>5} {'slots':>5} {'estimate':>9} {'starts t1/t2/t3':>16} "
          f"{'worker-s %':>16} {'worst':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.lengths.split(","):
            for slots in map(int, args.slots.split(",")):
                for fixed in (False, True) if not args.no_fixed else (False,):
                    got = one_run(args.url, kind, slots, fixed, Path(tmp))
                    starts, share = got["starts"], got["share"]
                    assert isinstance(starts, dict) and isinstance(share, dict)
                    worst = max(abs(share[t] - ideal[t]) for t in WEIGHTS)
                    print(
                        f"{kind:>5} {slots:>5} {'fixed 1s' if fixed else 'learned':>9} "
                        f"{'/'.join(str(starts[t]) for t in WEIGHTS):>16} "
                        f"{'/'.join(f'{100 * share[t]:.1f}' for t in WEIGHTS):>16} "
                        f"{100 * worst:>5.1f}p",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
