"""Does ``fairq simulate`` agree with reality? The demo's workload, run for real and simulated.

Runs ``fairq demo``'s scenario on real worker processes over SQLite (``fairq.demo.runner``),
then feeds the simulator the same arrivals (each job's ``enqueued_at``), the durations the
workers measured (``finished_at - started_at``), the cost the producer declared, and as many
workers as the real run had slots (processes x concurrency), with the fairq strategy. Each
mode's tenant is the one the scheduler saw (FIFO mode: one shared tenant). Prints each
tenant's wait p50/p99, real vs simulated, and their ratio.

    .venv/bin/python benchmarks/sim_vs_real.py
    .venv/bin/python benchmarks/sim_vs_real.py --greedy-jobs 8000 --job-ms 10 --modes fair
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fairq.demo.figures import JobRecord, mode_figures
from fairq.demo.jobs import make_app
from fairq.demo.runner import ModeRun, job_records, run_mode
from fairq.demo.scenario import GREEDY, Mode, Scenario
from fairq.policy.metrics import Waits
from fairq.sim.engine import SimJob, simulate
from fairq.sim.strategies.fairq import Fairq


def run_real(scenario: Scenario, mode: Mode, work_dir: Path) -> list[JobRecord]:
    """One mode of the demo on real workers; the finished jobs' records."""
    url = f"sqlite:///{work_dir / f'{mode.value}.db'}"
    app = make_app(url)
    try:
        run = ModeRun(mode=mode, queue=f"vs-{mode.value}")
        run_mode(app, scenario, run, url, work_dir, lambda s: None, 600.0)
        return job_records(app, run)
    finally:
        app.close()


def run_simulated(real: Sequence[JobRecord], scenario: Scenario, mode: Mode) -> list[JobRecord]:
    """The same arrivals and measured durations through the fairq strategy.

    The simulated workers are ready at the first real start (real workers are started after
    the flood is enqueued and take a moment to boot): a job enqueued before that arrives then
    in the simulation, and its wait still counts from its real ``enqueued_at``.
    """
    origin = min(r.started_at for r in real)
    ordered = sorted(real, key=lambda r: r.enqueued_at)
    jobs = [
        SimJob(
            id=i,
            arrival=max(0.0, r.enqueued_at - origin),
            tenant=mode.scheduling_tenant(r.customer),
            duration=r.finished_at - r.started_at,
            cost=scenario.job_seconds,  # what the demo's producer declares
        )
        for i, r in enumerate(ordered)
    ]
    slots = scenario.workers * scenario.concurrency
    records = simulate(jobs, Fairq(), workers=slots, seed=1)
    return [
        JobRecord(
            customer=ordered[r.job.id].customer,
            enqueued_at=ordered[r.job.id].enqueued_at,
            started_at=origin + r.start,
            finished_at=origin + r.finish,
        )
        for r in records
    ]


def _ms(value: float) -> str:
    return f"{value * 1000:9.1f}"


def _ratio(sim: float, real: float) -> str:
    return f"{sim / real:6.2f}" if real > 0 else "     -"


def compare(scenario: Scenario, mode: Mode, work_dir: Path) -> None:
    real = run_real(scenario, mode, work_dir)
    simulated = run_simulated(real, scenario, mode)
    tenants, small = scenario.tenants, scenario.small_names
    got = mode_figures(real, tenants, small, GREEDY)
    sim = mode_figures(simulated, tenants, small, GREEDY)
    print(
        f"\n{mode.label}: {len(real)} jobs, {scenario.workers} x {scenario.concurrency} slots; "
        f"makespan real {got.elapsed:.2f} s, simulated {sim.elapsed:.2f} s "
        f"(ratio {sim.elapsed / got.elapsed:.2f}); workers booted in "
        f"{min(r.started_at for r in real) - min(r.enqueued_at for r in real):.2f} s"
    )
    head = f"{'real':>9} {'sim':>9} {'ratio':>6}"
    print(f"{'wait, ms':10} p50 {head}   p99 {head}")
    rows: list[tuple[str, Waits, Waits]] = [(t, got.tenants[t], sim.tenants[t]) for t in tenants]
    rows.append(("small, all", got.small, sim.small))
    for name, r, s in rows:
        print(
            f"{name:10}     {_ms(r.p50)} {_ms(s.p50)} {_ratio(s.p50, r.p50)}       "
            f"{_ms(r.p99)} {_ms(s.p99)} {_ratio(s.p99, r.p99)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Scenario()
    parser.add_argument("--greedy-jobs", type=int, default=defaults.greedy_jobs)
    parser.add_argument("--small-tenants", type=int, default=defaults.small_tenants)
    parser.add_argument("--jobs-per-small", type=int, default=defaults.jobs_per_small)
    parser.add_argument("--job-ms", type=float, default=defaults.job_seconds * 1000)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--modes", default="fifo,fair", help="fifo, fair or both")
    args = parser.parse_args()
    scenario = Scenario(
        greedy_jobs=args.greedy_jobs,
        small_tenants=args.small_tenants,
        jobs_per_small=args.jobs_per_small,
        job_seconds=args.job_ms / 1000,
        workers=args.workers,
        concurrency=args.concurrency,
    )
    with tempfile.TemporaryDirectory(prefix="fairq-sim-vs-real-") as work_dir:
        for name in args.modes.split(","):
            compare(scenario, Mode(name.strip()), Path(work_dir))


if __name__ == "__main__":
    main()
