"""``fairq demo``: the showcase. Thin: options in, ``fairq.demo`` does the work, tables out."""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from fairq.cli import cli
from fairq.cli.admin._common import InputError, StoreError, err_console, out_console
from fairq.cli.numbers import Whole
from fairq.demo.namespace import demo_namespace
from fairq.demo.report import render, to_json
from fairq.demo.runner import Snapshot, run_demo
from fairq.demo.scenario import Mode, Scenario
from fairq.demo.workers import WorkerFailed
from fairq.errors import FairqError
from fairq.urls import redact_url


@cli.command(
    short_help="Watch fair scheduling beat FIFO for small tenants (seconds).",
    epilog="""\b
Examples:
  fairq demo                          # about ten seconds on a laptop
  fairq demo --jobs 1000 --small 3    # smaller and quicker
  fairq demo --json > result.json     # the same figures for scripts
  fairq demo --url redis://localhost  # on your server, in a namespace removed at the end
""",
)
@click.option(
    "--jobs",
    "greedy_jobs",
    type=Whole(1, 1_000_000),
    default=4000,
    show_default=True,
    help="How many jobs the greedy tenant floods the queue with.",
)
@click.option(
    "--small",
    "small_tenants",
    type=Whole(1, 100),
    default=4,
    show_default=True,
    help="How many small tenants arrive during the flood.",
)
@click.option(
    "--per-small",
    "jobs_per_small",
    type=Whole(1, 10_000),
    default=5,
    show_default=True,
    help="Jobs each small tenant enqueues.",
)
@click.option(
    "--job-ms",
    type=click.FloatRange(0, 10_000),
    default=5.0,
    show_default=True,
    help="How long each job sleeps, in milliseconds.",
)
@click.option(
    "--workers", type=Whole(1, 64), default=2, show_default=True, help="Worker processes."
)
@click.option(
    "--concurrency",
    type=Whole(1, 256),
    default=4,
    show_default=True,
    help="Jobs each worker process runs at once.",
)
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help="Run on this store's server instead of a temporary SQLite file, in a namespace of its "
    "own (a fresh Redis key prefix, PostgreSQL schema or SQLite file) removed at the end.",
)
@click.option("--keep", is_flag=True, help="Keep the demo's store (or namespace) and worker logs.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON (stdout).")
def demo(
    greedy_jobs: int,
    small_tenants: int,
    jobs_per_small: int,
    job_ms: float,
    workers: int,
    concurrency: int,
    url: str | None,
    keep: bool,
    as_json: bool,
) -> None:
    """Show fairq's point: one tenant floods the queue, do the small ones still get served?

    A greedy tenant enqueues thousands of short jobs; once the workers are into them, a few small
    tenants enqueue a handful each. This runs twice on real worker processes: first in plain
    FIFO order (what Celery and RQ do), then with fairq's per-tenant fair scheduling, and
    compares how long each tenant's jobs waited, the throughput, and Jain's fairness index.
    """
    if url is not None and url.lower().startswith("memory:"):
        raise InputError(
            "memory:// lives inside one process; the demo runs real worker "
            "processes, so give a shared store such as sqlite:///demo.db"
        )
    scenario = Scenario(
        greedy_jobs=greedy_jobs,
        small_tenants=small_tenants,
        jobs_per_small=jobs_per_small,
        job_seconds=job_ms / 1000,
        workers=workers,
        concurrency=concurrency,
    )
    work_dir = Path(tempfile.mkdtemp(prefix="fairq-demo-"))
    err = err_console()
    try:
        with ExitStack() as namespace:
            store = f"sqlite:///{work_dir / 'demo.db'}"
            if url is not None:  # its own namespace there, removed at the end (Ctrl-C too)
                store = namespace.enter_context(demo_namespace(url, keep=keep))
            err.print(f"store: {redact_url(store)}", markup=False, highlight=False)
            try:
                with ProgressView(err) as view:
                    result = run_demo(scenario, store, work_dir, view.update)
            finally:
                if keep and url is not None:
                    err.print(f"kept: {redact_url(store)}", markup=False, highlight=False)
    except WorkerFailed as exc:
        keep = True  # the worker logs are the way to find out why
        raise StoreError(f"{exc}\n(worker logs kept in {work_dir})") from None
    except FairqError as exc:
        raise StoreError(str(exc)) from None
    finally:
        if keep:
            err.print(f"kept: {work_dir}", markup=False, highlight=False)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    if as_json:
        click.echo(json.dumps(to_json(result, redact_url(store)), indent=2))
    else:
        out_console().print(render(result))


class ProgressView:
    """Live bars on a terminal; a few plain lines when stderr is a log file (CI)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"), console=console,
        )  # fmt: skip
        self.tasks: dict[tuple[Mode, str], TaskID] = {}
        self.phase: dict[Mode, str] = {}

    def __enter__(self) -> ProgressView:
        if self.live:
            self.progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.live:
            self.progress.stop()

    def update(self, snap: Snapshot) -> None:
        if self.live:
            self._bars(snap)
        else:
            self._lines(snap)

    def _bars(self, snap: Snapshot) -> None:
        label = "FIFO " if snap.mode is Mode.FIFO else "fairq"
        greedy = self._task(snap.mode, "greedy", f"{label} greedy done    ", snap.greedy_total)
        small = self._task(snap.mode, "small", f"{label} small started   ", snap.small_total)
        self.progress.update(greedy, completed=snap.greedy_done, note=f"{snap.elapsed:.1f} s")
        note = "waiting…" if snap.small_arrived else "not arrived yet"
        if snap.small_started == snap.small_total:
            note = "all started"
        self.progress.update(small, completed=snap.small_started, note=note)

    def _task(self, mode: Mode, kind: str, description: str, total: int) -> TaskID:
        key = (mode, kind)
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(description, total=total, note="")
        return self.tasks[key]

    def _lines(self, snap: Snapshot) -> None:
        phase = "started"
        if snap.small_arrived:
            phase = "small tenants arrived"
        if snap.small_arrived and snap.small_started == snap.small_total:
            phase = "small tenants all started"
        if snap.greedy_done == snap.greedy_total and phase.endswith("all started"):
            phase = "done"
        if self.phase.get(snap.mode) != phase:
            self.phase[snap.mode] = phase
            self.console.print(
                f"[{snap.mode.value}] {phase} at {snap.elapsed:.2f} s: greedy "
                f"{snap.greedy_done}/{snap.greedy_total} done, small "
                f"{snap.small_started}/{snap.small_total} started",
                markup=False, highlight=False,
            )  # fmt: skip
