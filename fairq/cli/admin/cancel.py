"""``fairq cancel ID…``: cancel jobs (docs/cancellation.md).

A scheduled or ready job is cancelled at once; a running one is asked to stop (its worker
learns of it within about a second); a finished one is left as it is. Every id is looked up
first, so a typo changes nothing.
"""

from __future__ import annotations

import json

import click

from fairq.cli import cli
from fairq.cli.admin._common import InputError, open_app, reported_errors, store_options
from fairq.contract import CancelOutcome, GetJobsParams

SAID = {
    CancelOutcome.CANCELLED: "cancelled {id} (it was {state}: it will not run)",
    CancelOutcome.REQUESTED: (
        "asked {id} to stop (it is running: its worker sees the request with its next "
        "heartbeat, and the job ends cancelled once it stops, unless it finishes first)"
    ),
    CancelOutcome.FINISHED: "left {id} as it is: it already ended ({state})",
    CancelOutcome.UNKNOWN: "no job with id {id} any more (deleted after its retention)",
}


@cli.command(
    epilog="""\b
Examples:
  fairq cancel 3f2a9c0d1e...
  fairq cancel 3f2a9c... 8b1e07... --json
"""
)
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead.")
@store_options
def cancel(ids: tuple[str, ...], as_json: bool, url: str | None, app_ref: str | None) -> None:
    """Cancel jobs: scheduled or ready ones at once, running ones asked to stop.

    A cancelled job ends in the state `cancelled`, is never retried, and is counted in
    `fairq stats`. A job that already ended (succeeded, dead, cancelled) is left as it is.
    An id no stored job has is refused (exit status 2) before any job is cancelled.
    """
    with reported_errors():
        app = open_app(url, app_ref, existing=True)
        try:
            wanted = list(dict.fromkeys(ids))  # each job once
            found = {info.id: info for info in app.backend.get_jobs(GetJobsParams(ids=wanted))}
            unknown = [i for i in wanted if i not in found]
            if unknown:
                raise InputError(
                    f"no job with id {', '.join(map(repr, unknown))}; nothing was cancelled"
                )
            outcomes = app.cancel_many(wanted)
        finally:
            app.close()
    if as_json:
        rows = [{"id": i, "outcome": str(o)} for i, o in zip(wanted, outcomes, strict=True)]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for job_id, outcome in zip(wanted, outcomes, strict=True):
        click.echo(SAID[outcome].format(id=job_id, state=found[job_id].state))
