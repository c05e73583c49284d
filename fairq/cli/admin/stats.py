"""``fairq stats``: who is waiting, running, done and dead, per queue and tenant, and why.

The table and ``--json`` carry the same figures, computed once by ``fairq.reports.queues`` (the
dashboard shows the same rows); the table only shortens long tenant ids (JSON keeps them
exact). "status" is the verdict (see ``fairq.reports.verdicts``): paused, capped,
rate-limited, throttled, running, waiting its turn or idle; "share" is the tenant's part of
the queue's recent worker-seconds.
"""

from __future__ import annotations

import json
from dataclasses import asdict

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
from fairq.policy import histogram
from fairq.policy.shards import split_shard
from fairq.reports import queues as reports
from fairq.reports.periodic import PeriodicReport, periodic_reports
from fairq.reports.queues import COUNTS, QueueReport, of_tenant
from fairq.reports.shards import ShardedQueue, in_queue, sharded_queues
from fairq.reports.text import format_run, format_wait
from fairq.reports.verdicts import format_span
from fairq.urls import redact_url


@cli.command(
    short_help="Per queue and tenant: settings, counts, oldest wait.",
    epilog="""\b
Examples:
  fairq stats
  fairq stats --queue imports
  fairq stats --queue imports --tenant acme --app myproject.jobs:app
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
    in flight). "learned run time" is what the store charges a job of each name when it is
    handed out: the mean of its recent runs (docs/internals/scheduler.md). "share" is the
    tenant's part of the queue's recent worker-seconds (each second of work counts half
    after the queue's half-life, else 60 s; running jobs as charged so far). "status":
    paused (weight 0), capped (n/N running), rate-limited (eligible again at T), throttled
    (its recent enqueues match a throttle rule, so new jobs go to a slower queue; pass --app
    to judge jobs no worker has published), running, waiting its
    turn (the fair scheduler is serving others first), or idle.

    Over the last 10 minutes (docs/internals/figures.md): "wait p50/p99" is how long the
    tenant's started jobs waited to start (each shown as its histogram bucket's top: at most
    twice the true value), "jobs/min" how many started per minute, and "next start" an
    estimate of when its oldest ready job starts, from its share of the queue's recent
    starts and its cap and rate limit (it assumes the recent past goes on).

    A sharded queue's shards (imports@0, …) are queues of their own; --queue imports shows
    them too, and a "shards of imports" table puts their loads side by side (with --tenant,
    its jobs in each; with --app as well, the shards the tenant is assigned).

    With --app, a "periodic" table shows the app's periodic jobs (docs/periodic.md): each
    schedule's cron, tenant and queue, when its next tick comes, and its last tick whose job
    the store has (of its last 5), with that job's id and state.
    """
    with reported_errors():
        app = open_app(url, app_ref, existing=True)
        try:
            # One read of every tenant (of the queues asked: a queue comes with its shards);
            # the tenant's view is cut from it.
            shard = queue is not None and split_shard(queue) is not None
            every = queue_reports(app, queue if shard else None, None, now())
            if queue is not None and not shard:
                every = [r for r in every if in_queue(r.queue, queue)]
            reports = every if tenant is None else of_tenant(every, tenant)
            sharded = [] if shard else shard_views(app, every, tenant)
            periodic = periodic_rows(app, queue, tenant, now())
        finally:
            app.close()
    if as_json:
        payload = {"store": redact_url(app.url), "queues": [asdict(r) for r in reports]}
        payload["shards"] = [asdict(s) for s in sharded]
        payload["periodic"] = [asdict(p) for p in periodic]
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    console = out_console()
    if periodic:
        console.print(render_periodic(periodic))
    if not reports:
        console.print("No queues yet: nothing has been enqueued in this store.")
        return
    for report in reports:
        console.print(render_queue(report))
        if any(row["figures_window"] > 0 for row in report.tenants):
            console.print(render_recent(report))
    for view in sharded:
        console.print(render_shards(view, tenant))


def periodic_rows(
    app: App, queue: str | None, tenant: str | None, at: float
) -> list[PeriodicReport]:
    """The app's periodic jobs (of ``queue`` and ``tenant``, when given)."""
    chosen = [
        s
        for s in app.schedules.values()
        if (queue is None or in_queue(s.queue, queue)) and (tenant is None or s.tenant == tenant)
    ]
    return periodic_reports(app.backend, chosen, at) if chosen else []


def render_periodic(rows: list[PeriodicReport]) -> Table:
    """Each schedule: when its next tick comes, and its last tick's job in the store."""
    table = Table(title=Text("periodic", style="bold"), title_justify="left")
    for name in ("schedule", "cron", "tenant", "queue", "next tick", "last tick", "job", "state"):
        table.add_column(name, no_wrap=name in ("schedule", "tenant"))
    for row in rows:
        cron = row.cron if row.timezone == "UTC" else f"{row.cron} ({row.timezone})"
        table.add_row(
            safe_text(row.name, TABLE_TENANT_CHARS),
            cron,
            safe_text(row.tenant, TABLE_TENANT_CHARS),
            row.queue,
            f"in {format_age(row.next_in)}",
            format_time(row.last_tick),
            row.last_job_id or "-",
            row.last_state or "-",
        )
    return table


def shard_views(app: App, every: list[QueueReport], tenant: str | None) -> list[ShardedQueue]:
    """The shards of each sharded queue (loads over all tenants), and ``tenant``'s shards
    when the app (``--app``) declares the queue's sharding."""
    views = sharded_queues(every, tenant)
    for view in views:
        declared = app.queues.get(view.queue)
        if tenant is not None and declared is not None and declared.sharding is not None:
            view.assigned = declared.shards_of(tenant)
    return views


def render_shards(view: ShardedQueue, tenant: str | None) -> Table:
    """Each shard's load side by side: busy shards beside idle ones, and a tenant's own."""
    title = Text.assemble(("shards of ", "bold"), safe_text(view.queue))
    if tenant is not None:
        title.append("  (tenant ")
        title.append(safe_text(tenant, TABLE_TENANT_CHARS))
        if view.assigned is not None:
            title.append(f"'s shards: {', '.join(view.assigned)}")
        title.append(")")
    table = Table(title=title, title_justify="left")
    for name in ("shard", "tenants", "ready", "running", "oldest ready"):
        table.add_column(name, justify="left" if name == "shard" else "right")
    if tenant is not None:
        table.add_column("its ready", justify="right")
        table.add_column("its running", justify="right")
    for row in view.shards:
        cells = [row["shard"], str(row["tenants"]), str(row["ready"]), str(row["running"])]
        cells.append(format_age(row["oldest_ready_age"]))
        if tenant is not None:
            cells += [str(row["tenant_ready"]), str(row["tenant_running"])]
        table.add_row(*cells)
    return table


def queue_reports(app: App, queue: str | None, tenant: str | None, at: float) -> list[QueueReport]:
    """The reports of ``fairq.reports.queues``, judging throttles by ``app``'s jobs too."""
    declared = [d.job_type for d in app.jobs.values()]
    return reports.queue_reports(app.backend, declared, queue, tenant, at)


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
    if report.job_costs:
        learned = ", ".join(
            f"{c['name']} {format_run(c['estimate'])}" for c in report.job_costs[:5]
        )
        more = f" (+{len(report.job_costs) - 5} more)" if len(report.job_costs) > 5 else ""
        title.append(f"\n  learned run time: {learned}{more}")
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
    for name in ("wait p50", "wait p99", "jobs/min", *histogram.OUTCOMES):
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
