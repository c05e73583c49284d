"""What the pages show, read from the store through the App (no starlette here).

Every read goes through ``fairq.reports.queues``, the same rows ``fairq stats`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairq.app import App
from fairq.contract import TenantStats
from fairq.job import JobInfo
from fairq.reports.queues import QueueReport, queue_reports

#: The live chart follows this many tenants (those served most lately), plus the ones the page
#: already draws, at most ``CHART_MOST`` in all; the rest are summed as "others".
CHART_TOP = 8
CHART_MOST = 16
DEAD_LIMIT = 200


def reports(app: App, queue: str | None = None) -> list[QueueReport]:
    """Every queue (or ``queue``) with all its tenants, judged now."""
    declared = [d.job_type for d in app.jobs.values()]
    return queue_reports(app.backend, declared, queue, None, app.clock())


def recent(report: QueueReport) -> dict[str, float | None]:
    """A queue's recent figures: jobs started per minute (all tenants) and the worst p99 wait."""
    rates = [r["jobs_per_minute"] for r in report.tenants if r["jobs_per_minute"] is not None]
    waits = [r["wait_p99"] for r in report.tenants if r["wait_p99"] is not None]
    return {
        "jobs_per_minute": sum(rates) if rates else None,
        "worst_wait_p99": max(waits) if waits else None,
    }


def tenant_row(report: QueueReport, tenant: str) -> dict[str, Any] | None:
    return next((row for row in report.tenants if row["tenant"] == tenant), None)


def tenant_stats(app: App, queue: str, tenant: str) -> TenantStats | None:
    found = app.stats(queue=queue, tenant=tenant)
    return found[0] if found else None


def overview_sample(found: list[QueueReport], at: float) -> dict[str, Any]:
    """Per queue: its lifetime successes and current counts, for the overview's live column."""
    return {
        "at": at,
        "queues": {
            r.queue: {
                "succeeded": r.totals["succeeded"],
                "ready": r.totals["ready"],
                "running": r.in_flight,
            }
            for r in found
        },
    }


def throughput_sample(report: QueueReport | None, keep: Sequence[str], at: float) -> dict[str, Any]:
    """One point of the live chart: lifetime successes of the queue and of the chosen tenants.

    The browser keeps the points and draws rates from the differences; a tenant enters the
    chart when it is among the ``CHART_TOP`` served most lately (its decayed usage).
    """
    if report is None:
        return {"at": at, "total": 0, "tenants": {}}
    rows = report.tenants
    top = sorted(rows, key=lambda r: (-r["usage"], -r["running"], r["tenant"]))[:CHART_TOP]
    chosen = {r["tenant"] for r in top}
    wanted = set(keep)
    for row in rows:
        if len(chosen) >= CHART_MOST:
            break
        if row["tenant"] in wanted:
            chosen.add(row["tenant"])
    return {
        "at": at,
        "total": report.totals["succeeded"],
        "tenants": {r["tenant"]: r["succeeded"] for r in rows if r["tenant"] in chosen},
    }


def dead_jobs(app: App, queue: str | None, tenant: str | None) -> list[JobInfo]:
    return app.dead(queue=queue, tenant=tenant, limit=DEAD_LIMIT)
