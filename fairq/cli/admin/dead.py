"""``fairq dead list`` and ``fairq dead requeue``: jobs that ran out of attempts, and their return.

Dead jobs are never dropped; they wait here until someone looks at the error and requeues them
(with a fresh set of attempts and their original place in their tenant's queue).
"""

from __future__ import annotations

import json
from dataclasses import asdict

import click
from rich.table import Table

from fairq.app import App
from fairq.cli import cli
from fairq.cli.admin._common import (
    InputError,
    format_time,
    open_app,
    out_console,
    reported_errors,
    safe_text,
    store_options,
)
from fairq.cli.numbers import Whole
from fairq.contract import GetJobsParams
from fairq.job import JobInfo, JobState
from fairq.policy.bounds import MAX_INT

#: ``--all`` requeues in batches of this many, so a huge dead set never loads at once.
BATCH = 500


@cli.group(
    short_help="List and requeue dead jobs.",
    epilog="""\b
Examples:
  fairq dead list --queue imports
  fairq dead requeue 3f2a9c... 8b1e07...
  fairq dead requeue --all --queue imports
""",
)
def dead() -> None:
    """Inspect and requeue dead jobs (jobs that used up all their attempts)."""


@dead.command(name="list", epilog="Example:\n\n  fairq dead list --tenant acme --limit 20")
@click.option("--queue", default=None, help="Only this queue.")
@click.option("--tenant", default=None, help="Only this tenant (exact id).")
@click.option(
    "--limit",
    type=Whole(1, MAX_INT),
    default=50,
    show_default=True,
    help="Show at most this many, oldest death first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead.")
@store_options
def list_dead(
    queue: str | None,
    tenant: str | None,
    limit: int,
    as_json: bool,
    url: str | None,
    app_ref: str | None,
) -> None:
    """List dead jobs: id, name, tenant, attempts, last error and when it died."""
    with reported_errors():
        app = open_app(url, app_ref, existing=True)
        try:
            jobs = app.dead(queue=queue, tenant=tenant, limit=limit)
        finally:
            app.close()
    if as_json:
        rows = [{**asdict(j), "state": str(j.state)} for j in jobs]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    console = out_console()
    if not jobs:
        console.print("No dead jobs.")
        return
    console.print(_table(jobs))


def _table(jobs: list[JobInfo]) -> Table:
    table = Table(title=f"{len(jobs)} dead jobs (oldest first)", title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("name")
    table.add_column("queue")
    table.add_column("tenant")
    table.add_column("attempts", justify="right")
    table.add_column("last error", overflow="fold")
    table.add_column("died", no_wrap=True)
    for job in jobs:
        first_line = (job.last_error or "").strip().splitlines()[:1]
        table.add_row(
            job.id,
            safe_text(job.name, 40),
            job.queue,
            safe_text(job.tenant, 30),
            f"{job.attempts}/{job.max_attempts}",
            safe_text(first_line[0] if first_line else "-", 80),
            format_time(job.finished_at),
        )
    return table


@dead.command(
    epilog="""\b
Examples:
  fairq dead requeue 3f2a9c0d1e...          # one job
  fairq dead requeue --all --queue imports  # every dead job of queue imports
"""
)
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option(
    "--all", "everything", is_flag=True, help="Requeue every dead job (see --queue, --tenant)."
)
@click.option("--queue", default=None, help="With --all: only this queue.")
@click.option("--tenant", default=None, help="With --all: only this tenant.")
@store_options
def requeue(
    ids: tuple[str, ...],
    everything: bool,
    queue: str | None,
    tenant: str | None,
    url: str | None,
    app_ref: str | None,
) -> None:
    """Give dead jobs a fresh set of attempts and put them back in their tenant's queue."""
    if bool(ids) == everything:
        raise InputError("give job ids, or --all (not both)")
    if ids and (queue is not None or tenant is not None):
        raise InputError("--queue and --tenant only go with --all")
    with reported_errors():
        app = open_app(url, app_ref, existing=True)
        try:
            count = _requeue_all(app, queue, tenant) if everything else _requeue_ids(app, ids)
        finally:
            app.close()
    click.echo(f"requeued {count} job{'' if count == 1 else 's'}")


def _requeue_ids(app: App, ids: tuple[str, ...]) -> int:
    """Check every id first, so a typo changes nothing; jobs not dead are only reported."""
    found = {job.id: job for job in app.backend.get_jobs(GetJobsParams(ids=list(ids)))}
    unknown = [i for i in ids if i not in found]
    if unknown:
        raise InputError(f"no job with id {', '.join(map(repr, unknown))}; nothing was requeued")
    alive = [i for i in ids if found[i].state is not JobState.DEAD]
    for job_id in alive:
        click.echo(f"skipped {job_id}: it is {found[job_id].state}, not dead", err=True)
    wanted = [i for i in ids if i not in alive]
    return app.requeue(wanted) if wanted else 0


def _requeue_all(app: App, queue: str | None, tenant: str | None) -> int:
    total = 0
    while True:
        batch = app.dead(queue=queue, tenant=tenant, limit=BATCH)
        if not batch:
            return total
        done = app.requeue([job.id for job in batch])
        total += done
        if done == 0:  # another process requeued them first; avoid spinning
            return total
