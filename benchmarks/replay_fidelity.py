"""Does a replay from the store agree with what really ran? A real flood on each store, replayed.

For each store: ``fairq demo``'s fair run (a greedy tenant's flood, then small tenants, on real
worker processes: ``fairq.demo.runner``) in a namespace of its own (fairq.demo.namespace), then
``fairq simulate --from``'s as-is replay of that queue, read back with ``Backend.history``.
Prints simulated ÷ real for each tenant's p50 and p99 wait and for the makespan, and the
replay's fidelity error (fairq/sim/whatif.py). The bar (issue #33): within about 10 %.

    .venv/bin/python benchmarks/replay_fidelity.py                       # SQLite only
    .venv/bin/python benchmarks/replay_fidelity.py --url redis://127.0.0.1:6379/9 \\
        --url postgresql://postgres@127.0.0.1:5432/test --greedy-jobs 3000 --job-ms 20
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from pathlib import Path

from fairq.demo.jobs import make_app
from fairq.demo.namespace import demo_namespace
from fairq.demo.runner import ModeRun, run_mode
from fairq.demo.scenario import Mode, Scenario
from fairq.sim import whatif
from fairq.sim.replay import read_history
from fairq.urls import redact_url


def fidelity_on(url: str, scenario: Scenario, work_dir: Path) -> None:
    with demo_namespace(url) as namespaced:
        app = make_app(namespaced)
        try:
            run = ModeRun(mode=Mode.FAIR, queue=f"fidelity-{uuid.uuid4().hex[:8]}")
            run_mode(app, scenario, run, namespaced, work_dir, lambda s: None, 600.0)
            recorded = read_history(app.backend, run.queue, 0.0, 1e12)
        finally:
            app.close()
    actual, as_is = whatif.replay(recorded, whatif.Changes(), ["fairq"])
    found = whatif.fidelity(actual, as_is)
    assert found is not None
    print(
        f"\n{redact_url(url).split('://')[0]}: {recorded.count:,} jobs, "
        f"{recorded.workers()} workers seen; makespan real {actual.figures.makespan:.2f} s, "
        f"replayed {as_is.figures.makespan:.2f} s (ratio {found.makespan:.2f}); "
        f"fidelity error {found.error:.1%}"
    )
    print(f"{'tenant':10} {'p50 real':>9} {'replayed':>9} {'ratio':>6}   "
          f"{'p99 real':>9} {'replayed':>9} {'ratio':>6}")  # fmt: skip
    for tenant, real in actual.tenants.items():
        sim = as_is.tenants[tenant]
        print(
            f"{tenant:10} {real.p50:9.3f} {sim.p50:9.3f} {_ratio(sim.p50, real.p50)}   "
            f"{real.p99:9.3f} {sim.p99:9.3f} {_ratio(sim.p99, real.p99)}"
        )


def _ratio(sim: float, real: float) -> str:
    return f"{sim / real:6.2f}" if real > 0 else "     -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Scenario()
    parser.add_argument("--url", action="append", default=[], help="a store (repeat); "
                        "default: a temporary SQLite file")  # fmt: skip
    parser.add_argument("--greedy-jobs", type=int, default=defaults.greedy_jobs)
    parser.add_argument("--small-tenants", type=int, default=defaults.small_tenants)
    parser.add_argument("--jobs-per-small", type=int, default=defaults.jobs_per_small)
    parser.add_argument("--job-ms", type=float, default=defaults.job_seconds * 1000)
    args = parser.parse_args()
    scenario = Scenario(
        greedy_jobs=args.greedy_jobs,
        small_tenants=args.small_tenants,
        jobs_per_small=args.jobs_per_small,
        job_seconds=args.job_ms / 1000,
    )
    with tempfile.TemporaryDirectory(prefix="fairq-replay-fidelity-") as work_dir:
        for url in args.url or [f"sqlite:///{work_dir}/fidelity.db"]:
            fidelity_on(url, scenario, Path(work_dir))


if __name__ == "__main__":
    main()
