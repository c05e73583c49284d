"""How many simulated jobs per second ``fairq.sim`` runs, per strategy (one core).

The budget (issue #18): 1,000,000 jobs over 10,000 tenants in under a minute. The workload is
``many-small`` (a Poisson stream at 90 % load); building it and computing the figures are
timed apart from the simulation itself.

    .venv/bin/python benchmarks/sim_speed.py                    # 1,000,000 jobs, fairq + fifo
    .venv/bin/python benchmarks/sim_speed.py --jobs 100000 --strategies fairq,fifo,lottery
"""

from __future__ import annotations

import argparse
import time

from fairq.sim.engine import simulate
from fairq.sim.metrics import figures
from fairq.sim.strategies import build
from fairq.sim.workloads import make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--strategies", default="fairq,fifo")
    args = parser.parse_args()
    started = time.perf_counter()
    params = {
        "tenants": str(args.tenants),
        "per_tenant": str(max(1, args.jobs // args.tenants)),
        "workers_hint": str(args.workers),
    }
    workload = make("many-small", 1, params)
    built = time.perf_counter() - started
    print(
        f"workload: {len(workload.jobs):,} jobs, {args.tenants:,} tenants, built in {built:.1f} s"
    )
    for spec in args.strategies.split(","):
        started = time.perf_counter()
        records = simulate(workload.jobs, build(spec, {}), workers=args.workers, seed=1)
        ran = time.perf_counter() - started
        started = time.perf_counter()
        result = figures(records, workers=args.workers)
        measured = time.perf_counter() - started
        print(
            f"{spec:12} simulated in {ran:6.1f} s = {len(records) / ran:9,.0f} jobs/s; "
            f"figures in {measured:5.1f} s; utilisation {result.utilisation:.0%}"
        )


if __name__ == "__main__":
    main()
