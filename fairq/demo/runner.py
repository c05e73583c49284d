"""Run the demo scenario once per mode on real worker processes, and collect what happened.

Each mode gets its own queue in the same store, so the two runs never see each other's jobs.
The runner knows nothing about display: it reports a ``Snapshot`` to a callback while it waits.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fairq.app import App, Call, Options
from fairq.contract import GetJobsParams
from fairq.demo.figures import JobRecord, ModeFigures, mode_figures
from fairq.demo.jobs import WORK, make_app
from fairq.demo.scenario import GREEDY, Mode, Scenario
from fairq.demo.workers import WorkerFailed, start_workers
from fairq.job import JobState

APP_REF = "fairq.demo.jobs:app"
POLL_SECONDS = 0.02
#: get_jobs is asked this many ids at a time (SQLite limits the variables in one statement).
CHUNK = 500


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Where one mode's run is, for a progress display."""

    mode: Mode
    greedy_done: int
    greedy_total: int
    small_started: int
    small_total: int
    small_arrived: bool
    elapsed: float


@dataclass
class DemoResult:
    scenario: Scenario
    url: str
    modes: dict[Mode, ModeFigures] = field(default_factory=dict)


@dataclass
class ModeRun:
    """One mode's bookkeeping: which job is whose."""

    mode: Mode
    queue: str
    customers: dict[str, str] = field(default_factory=dict)  # job id -> real tenant
    small_ids: list[str] = field(default_factory=list)


OnProgress = Callable[[Snapshot], None]


def run_demo(
    scenario: Scenario,
    url: str,
    log_dir: Path,
    on_progress: OnProgress = lambda s: None,
    timeout: float = 300.0,
) -> DemoResult:
    """FIFO first, then fair: the same jobs, the same workers, one store."""
    app = make_app(url)
    result = DemoResult(scenario=scenario, url=url)
    run_id = uuid.uuid4().hex[:8]
    try:
        for mode in (Mode.FIFO, Mode.FAIR):
            run = ModeRun(mode=mode, queue=f"demo-{run_id}-{mode.value}")
            run_mode(app, scenario, run, url, log_dir, on_progress, timeout)
            records = job_records(app, run)
            result.modes[mode] = mode_figures(
                records, scenario.tenants, scenario.small_names, GREEDY
            )
    finally:
        app.close()
    return result


def run_mode(
    app: App,
    scenario: Scenario,
    run: ModeRun,
    url: str,
    log_dir: Path,
    on_progress: OnProgress,
    timeout: float,
) -> None:
    """One mode of the demo with real worker processes, until every job is done (also used by
    benchmarks/sim_vs_real.py to compare the simulator with a real run)."""
    _enqueue(app, scenario, run, [GREEDY], scenario.greedy_jobs)
    began = time.monotonic()
    workers = start_workers(
        scenario.workers, APP_REF, url, run.queue, scenario.concurrency, log_dir
    )
    try:
        arrived = False
        while True:
            finished, running = _counts(app, run)
            on_progress(_snapshot(app, scenario, run, finished, arrived, time.monotonic() - began))
            if not arrived and finished + running >= scenario.arrival_threshold:
                _enqueue(app, scenario, run, scenario.small_names, scenario.jobs_per_small)
                arrived = True
                continue
            if arrived and finished == scenario.total_jobs:
                break
            if workers.running() == 0:
                workers.check()
                raise WorkerFailed(
                    "the workers exited before every job was done; see their logs in "
                    f"{log_dir} (run with --keep to keep them)"
                )
            if time.monotonic() - began > timeout:
                raise WorkerFailed(f"the {run.mode.value} run took over {timeout:.0f} s")
            time.sleep(POLL_SECONDS)
        workers.finish()
    finally:
        workers.stop()


def _enqueue(app: App, scenario: Scenario, run: ModeRun, tenants: Sequence[str], each: int) -> None:
    """The tenants' jobs in one batch: they arrive together, so the comparison is even."""
    calls = []
    for customer in tenants:
        options = Options(tenant=run.mode.scheduling_tenant(customer), queue=run.queue)
        calls += [Call(WORK, (customer, scenario.job_seconds), {}, options)] * each
    ids = app.enqueue_many(calls)
    for job_id, call in zip(ids, calls, strict=True):
        customer = call.args[0]
        run.customers[job_id] = customer
        if customer != GREEDY:
            run.small_ids.append(job_id)


def _snapshot(
    app: App, scenario: Scenario, run: ModeRun, finished: int, arrived: bool, elapsed: float
) -> Snapshot:
    small = app.backend.get_jobs(GetJobsParams(ids=run.small_ids)) if run.small_ids else []
    small_done = sum(1 for j in small if j.state is JobState.SUCCEEDED)
    return Snapshot(
        mode=run.mode,
        greedy_done=finished - small_done,
        greedy_total=scenario.greedy_jobs,
        small_started=sum(1 for j in small if j.started_at is not None),
        small_total=scenario.small_tenants * scenario.jobs_per_small,
        small_arrived=arrived,
        elapsed=elapsed,
    )


def _counts(app: App, run: ModeRun) -> tuple[int, int]:
    """Jobs finished (succeeded or dead) and running in this mode's queue."""
    rows = app.stats(queue=run.queue)
    return sum(r.succeeded + r.dead for r in rows), sum(r.running for r in rows)


def job_records(app: App, run: ModeRun) -> list[JobRecord]:
    """Every job of a run as the figures read it: its real tenant and its three times."""
    ids = list(run.customers)
    records = []
    for i in range(0, len(ids), CHUNK):
        for job in app.backend.get_jobs(GetJobsParams(ids=ids[i : i + CHUNK])):
            if job.started_at is None or job.finished_at is None:
                continue
            records.append(
                JobRecord(
                    customer=run.customers[job.id],
                    enqueued_at=job.enqueued_at,
                    started_at=job.started_at,
                    finished_at=job.finished_at,
                )
            )
    return records
