"""``fairq stats``: who is waiting, running, done and dead, per queue and tenant.

The table and ``--json`` carry the same figures, computed once by ``queue_reports``; the table
only shortens long tenant ids (JSON keeps them exact).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from fairq.app import App
from fairq.cli import cli
from fairq.cli.admin._common import (
    TABLE_TENANT_CHARS,
    format_age,
    format_cap,
    now,
    open_app,
    out_console,
    reported_errors,
    safe_text,
    store_options,
)
from fairq.contract import TenantStats
from fairq.urls import redact_url

COUNTS = ("ready", "scheduled", "running", "succeeded", "failed", "dead")


@dataclass
class QueueReport:
    """One queue's defaults, tenants and totals, as both outputs show them."""

    queue: str
    default_weight: float
    default_max_running: int | None
    tenants: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)


@cli.command(
    short_help="Per queue and tenant: settings, counts, oldest wait.",
    epilog="""\b
Examples:
  fairq stats
  fairq stats --queue imports
  fairq stats --json | jq '.queues[].totals.ready'
""",
)
@click.option("--queue", default=None, help="Only this queue.")
@click.option("--tenant", default=None, help="Only this tenant (exact id).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead.")
@store_options
def stats(
    queue: str | None, tenant: str | None, as_json: bool, url: str | None, app_ref: str | None
) -> None:
    """Show each (queue, tenant): weight, cap, ready, scheduled, running, done, dead.

    "oldest ready" is how long the longest-waiting ready job has waited; failed counts failed
    attempts (including expired leases), dead counts jobs out of attempts (see `fairq dead`).
    """
    with reported_errors():
        app = open_app(url, app_ref)
        try:
            reports = queue_reports(app, queue, tenant, now())
        finally:
            app.close()
    if as_json:
        payload = {"store": redact_url(app.url), "queues": [asdict(r) for r in reports]}
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    console = out_console()
    if not reports:
        console.print("No queues yet: nothing has been enqueued in this store.")
        return
    for report in reports:
        console.print(render_queue(report))


def queue_reports(app: App, queue: str | None, tenant: str | None, at: float) -> list[QueueReport]:
    by_queue: dict[str, list[TenantStats]] = defaultdict(list)
    for row in app.stats(queue=queue, tenant=tenant):
        by_queue[row.queue].append(row)
    reports = []
    for name, rows in by_queue.items():
        defaults = app.backend.get_queue(name)
        report = QueueReport(name, defaults.weight, defaults.max_running)
        report.tenants = [_tenant_row(row, at) for row in rows]
        report.totals = _totals(report.tenants)
        reports.append(report)
    return reports


def _tenant_row(row: TenantStats, at: float) -> dict[str, Any]:
    age = None if row.oldest_ready_at is None else max(0.0, at - row.oldest_ready_at)
    return {
        "tenant": row.tenant,
        "weight": row.weight,
        "max_running": row.max_running,
        **{name: getattr(row, name) for name in COUNTS},
        "oldest_ready_at": row.oldest_ready_at,
        "oldest_ready_age": age,
    }


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {name: sum(r[name] for r in rows) for name in COUNTS}
    ages = [r["oldest_ready_age"] for r in rows if r["oldest_ready_age"] is not None]
    totals["tenants"] = len(rows)
    totals["oldest_ready_age"] = max(ages) if ages else None
    return totals


def render_queue(report: QueueReport) -> Table:
    title = Text.assemble(
        ("queue ", "bold"),
        safe_text(report.queue),
        f"  (default weight {report.default_weight:g}, "
        f"cap {format_cap(report.default_max_running)})",
    )
    table = Table(title=title, title_justify="left", show_footer=True)
    table.add_column("tenant", footer=f"{report.totals['tenants']} tenants", no_wrap=True)
    table.add_column("weight", justify="right")
    table.add_column("cap", justify="right")
    for name in COUNTS:
        table.add_column(name, justify="right", footer=str(report.totals[name]))
    table.add_column(
        "oldest ready", justify="right", footer=format_age(report.totals["oldest_ready_age"])
    )
    for row in report.tenants:
        table.add_row(
            safe_text(row["tenant"], TABLE_TENANT_CHARS),
            f"{row['weight']:g}",
            format_cap(row["max_running"]),
            *(str(row[name]) for name in COUNTS),
            format_age(row["oldest_ready_age"]),
        )
    return table
