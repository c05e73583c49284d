"""``fairq job ID…``: what the store knows of one job, an iterative job's progress included.

The view for "where is my export?": state, attempts, times, the last error's first line, a
cancel request, the result it keeps (``result_ttl``) and, for an iterative job
(``App.iterative_job``), its cursor, items done and slices so far.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import click
from rich.table import Table
from rich.text import Text

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
from fairq.contract import GetJobsParams
from fairq.job import JobInfo

CURSOR_CHARS = 120  # a cursor longer than this is cut in the table (--json shows it whole)
RESULT_CHARS = 400  # so is a kept result (docs/results.md)


@cli.command(epilog="Example:\n\n  fairq job 3f2a9c0d1e... --json")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead.")
@store_options
def job(ids: tuple[str, ...], as_json: bool, url: str | None, app_ref: str | None) -> None:
    """Show jobs by id: state, attempts, times, last error, result, an iterative job's progress."""
    with reported_errors():
        app = open_app(url, app_ref, existing=True)
        try:
            found = app.backend.get_jobs(GetJobsParams(ids=list(ids)))
        finally:
            app.close()
        unknown = sorted(set(ids) - {info.id for info in found})
        if unknown:
            raise InputError(f"no job with id {', '.join(map(repr, unknown))}")
    if as_json:
        rows = [{**asdict(info), "state": str(info.state)} for info in found]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    console = out_console()
    for info in found:
        console.print(_table(info))


def _table(info: JobInfo) -> Table:
    table = Table(title=f"job {info.id}", title_justify="left", show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    first_line = (info.last_error or "").strip().splitlines()[:1]
    rows: list[tuple[str, str | Text]] = [
        ("name", safe_text(info.name, 80)),
        ("queue", info.queue),
        ("tenant", safe_text(info.tenant, 80)),
        ("state", str(info.state)),
        ("attempts", f"{info.attempts}/{info.max_attempts}"),
        ("enqueued", format_time(info.enqueued_at)),
        ("started", format_time(info.started_at)),
        ("finished", format_time(info.finished_at)),
        ("last error", safe_text(first_line[0], 200) if first_line else "-"),
    ]
    if info.cancel_requested:
        rows.append(("cancel", "requested: it ends cancelled once its worker stops it"))
    if info.result_until is not None:
        result = json.dumps(info.result, ensure_ascii=False)
        rows += [
            ("result", safe_text(result, RESULT_CHARS)),
            ("result kept until", format_time(info.result_until)),
        ]
    if info.progress is not None:
        cursor = json.dumps(info.progress.cursor, ensure_ascii=False)
        rows += [
            ("cursor", safe_text(cursor, CURSOR_CHARS)),
            ("items done", str(info.progress.items)),
            ("slices", str(info.progress.slices)),
        ]
    for name, value in rows:
        table.add_row(name, value)
    return table
