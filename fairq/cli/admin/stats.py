"""``fairq stats``: who is waiting, running, done and dead, per queue and tenant, and why.

The table and ``--json`` carry the same figures, computed once by ``queue_reports``; the table
only shortens long tenant ids (JSON keeps them exact). "status" is ``App.tenant_report``'s
verdict (see ``fairq.reports.verdicts``): paused, capped, rate-limited, throttled, running,
waiting its turn or idle; "share" is the tenant's part of the queue's recent service.
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
    format_time,
    now,
    open_app,
    out_console,
    reported_errors,
    safe_text,
    store_options,
)
from fairq.cli.admin.tenants import format_weight
from fairq.contract import GetQueueParams, QueueSettings, TenantStats
from fairq.policy import histogram
from fairq.reports.figures import TenantSummary, summaries
from fairq.reports.verdicts import TenantReport, format_span
from fairq.urls import redact_url

COUNTS = ("ready", "scheduled", "running", "succeeded", "failed", "dead")


@dataclass
class QueueReport:
    """One queue's defaults, tenants and totals, as both outputs show them."""

    queue: str
    default_weight: float
    default_max_running: int | None
    default_rate: str | None
    half_life: float | None
    max_debt: float
    max_in_flight: int | None  # the queue's own cap on its jobs running at once
    in_flight: int = 0  # its jobs running now (leased), all tenants
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
    """Show each (queue, tenant): settings, counts, and why it is not running.

    "oldest ready" is how long the longest-waiting ready job has waited; failed counts failed
    attempts (including expired leases), dead counts jobs out of attempts (see `fairq dead`).
    "in flight" is the queue's jobs running now, all tenants, and its own cap on them (max
    in flight). "share" is the tenant's part of the queue's recent service (decaying with the
    queue's half-life, else 60 s). "status": paused (weight 0), capped (n/N running), rate-limited
    (eligible again at T), throttled (its recent enqueues match a throttle rule, so new jobs go
    to a slower queue; pass --app to judge jobs no worker has published), running, waiting its
    turn (the fair scheduler is serving others first), or idle.

    Over the last 10 minutes (docs/internals/figures.md): "wait p50/p99" is how long the
    tenant's started jobs waited to start (each shown as its histogram bucket's top: at most
    twice the true value), "jobs/min" how many started per minute, and "next start" an
    estimate of when its oldest ready job starts, from its share of the queue's recent
    starts and its cap and rate limit (it assumes the recent past goes on).
    """
    with reported_errors():
        app = open_app(url, app_ref, existing=True)
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
        if any(row["figures_window"] > 0 for row in report.tenants):
            console.print(render_recent(report))


def queue_reports(app: App, queue: str | None, tenant: str | None, at: float) -> list[QueueReport]:
    by_queue: dict[str, list[TenantStats]] = defaultdict(list)
    for row in app.stats(queue=queue, tenant=tenant):
        by_queue[row.queue].append(row)
    verdicts = {(r.queue, r.tenant): r for r in app.tenant_report(queue=queue, tenant=tenant)}
    figures = app.figures(queue=queue)  # every tenant's: a queue's rate and shares need them
    reports = []
    for name, rows in by_queue.items():
        defaults = app.backend.get_queue(GetQueueParams(queue=name))
        report = _queue_report(defaults)
        every = rows if tenant is None else app.stats(queue=name)  # all tenants of the queue
        sums = summaries(every, [f for f in figures if f.queue == name], at)
        report.tenants = [
            _tenant_row(row, verdicts.get((name, row.tenant)), at, sums[(name, row.tenant)])
            for row in rows
        ]
        report.totals = _totals(report.tenants)
        report.in_flight = sum(row.running for row in every)
        reports.append(report)
    return reports


def _queue_report(defaults: QueueSettings) -> QueueReport:
    return QueueReport(
        queue=defaults.queue,
        default_weight=defaults.weight,
        default_max_running=defaults.max_running,
        default_rate=None if defaults.rate is None else str(defaults.rate),
        half_life=defaults.half_life,
        max_debt=defaults.max_debt,
        max_in_flight=defaults.max_in_flight,
    )


def _tenant_row(
    row: TenantStats, verdict: TenantReport | None, at: float, summary: TenantSummary
) -> dict[str, Any]:
    age = None if row.oldest_ready_at is None else max(0.0, at - row.oldest_ready_at)
    limited = None if verdict is None else verdict.limited_until
    throttle = None if verdict is None or verdict.throttle is None else asdict(verdict.throttle)
    return {
        "tenant": row.tenant,
        "weight": row.weight,
        "max_running": row.max_running,
        "rate": None if row.rate is None else str(row.rate),
        **{name: getattr(row, name) for name in COUNTS},
        "oldest_ready_at": row.oldest_ready_at,
        "oldest_ready_age": age,
        "status": "idle" if verdict is None else verdict.status,
        "reason": "idle" if verdict is None else verdict.reason,
        "share": 0.0 if verdict is None else verdict.share,
        "usage": row.usage,
        "limited_until": limited,
        "limited_until_utc": None if limited is None else format_time(limited),
        "limited_in": None if limited is None else max(0.0, limited - at),
        "throttle": throttle,
        "wait_p50": _finite(summary.wait_p50),
        "wait_p99": _finite(summary.wait_p99),
        "jobs_per_minute": summary.started_per_minute,
        "ended_recently": summary.ended,
        "figures_window": summary.window,
        "next_start_estimate": summary.eta,
    }


def _finite(seconds: float | None) -> float | None:
    """A quantile beyond the last bucket as that bucket's bound (JSON has no infinity)."""
    return None if seconds is None else min(seconds, histogram.BOUNDS[-1])


def format_wait(seconds: float | None) -> str:
    """A wait quantile (a bucket's upper bound): ms below a second; ">" past the last one."""
    if seconds is None:
        return "-"
    if seconds >= histogram.BOUNDS[-1]:
        return ">" + format_age(histogram.BOUNDS[-1])
    if seconds < 1.0:
        return f"{seconds * 1000:.0f}ms"
    return format_age(seconds)


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
        f"cap {format_cap(report.default_max_running)}, "
        f"rate {report.default_rate or 'none'}, "
        f"half-life {'none' if report.half_life is None else format_span(report.half_life)}, "
        f"in flight {report.in_flight} of max {format_cap(report.max_in_flight)})",
    )
    table = Table(title=title, title_justify="left", show_footer=True)
    table.add_column("tenant", footer=f"{report.totals['tenants']} tenants", no_wrap=True)
    table.add_column("weight", justify="right")
    table.add_column("cap", justify="right")
    table.add_column("rate", justify="right")
    for name in COUNTS:
        table.add_column(name, justify="right", footer=str(report.totals[name]))
    table.add_column(
        "oldest ready", justify="right", footer=format_age(report.totals["oldest_ready_age"])
    )
    table.add_column("share", justify="right")
    table.add_column("status")
    for row in report.tenants:
        table.add_row(
            safe_text(row["tenant"], TABLE_TENANT_CHARS),
            format_weight(row["weight"]),
            format_cap(row["max_running"]),
            row["rate"] or "none",
            *(str(row[name]) for name in COUNTS),
            format_age(row["oldest_ready_age"]),
            f"{row['share']:.0%}",
            row["reason"],
        )
    return table


def render_recent(report: QueueReport) -> Table:
    """The queue's recent figures per tenant, a table of its own so both stay readable."""
    window = max(row["figures_window"] for row in report.tenants)
    title = Text.assemble(
        ("recent ", "bold"), safe_text(report.queue), f"  (last {format_age(window)})"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("tenant", no_wrap=True)
    for name in ("wait p50", "wait p99", "jobs/min", "succeeded", "failed", "expired"):
        table.add_column(name, justify="right")
    table.add_column("next start (est.)", justify="right")
    for row in report.tenants:
        ended = row["ended_recently"]
        table.add_row(
            safe_text(row["tenant"], TABLE_TENANT_CHARS),
            format_wait(row["wait_p50"]),
            format_wait(row["wait_p99"]),
            "-" if row["jobs_per_minute"] is None else f"{row['jobs_per_minute']:.1f}",
            *(str(ended.get(name, 0)) for name in histogram.OUTCOMES),
            _estimate(row["next_start_estimate"]),
        )
    return table


def _estimate(seconds: float | None) -> str:
    return "-" if seconds is None else f"~{format_age(seconds)}"
