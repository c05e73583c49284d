"""Per queue: its settings, each tenant's figures and verdict, and totals — one read of the store.

``fairq stats`` (table and ``--json``) and the dashboard show the same rows, built here, so the
two can never disagree about a tenant. A row is a plain dict (JSON-ready): the stored counts,
the settings in force, and the verdict of ``fairq.reports.verdicts`` with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from fairq.contract import (
    Backend,
    FiguresParams,
    GetQueueParams,
    JobCostsParams,
    JobType,
    QueueSettings,
    StatsParams,
    TenantStats,
)
from fairq.policy import histogram
from fairq.policy.bounds import check_tenant
from fairq.reports import throttle_hits
from fairq.reports import verdicts as status
from fairq.reports.figures import TenantSummary, summaries

COUNTS = ("ready", "scheduled", "running", "succeeded", "failed", "dead")
#: Counted in the rows (``--json``) and totals, not given a column of the table: the table is
#: as wide as a terminal holds; the recent figures' table shows cancelled runs.
MORE_COUNTS = ("cancelled",)


@dataclass
class QueueReport:
    """One queue's defaults, tenants and totals."""

    queue: str
    default_weight: float
    default_max_running: int | None
    default_rate: str | None
    half_life: float | None
    max_debt: float
    max_in_flight: int | None  # the queue's own cap on its jobs running at once
    in_flight: int = 0  # its jobs running now (leased), all tenants
    #: Each job name's learned run time (fairq.policy.cost): {"name", "runs", "estimate"}.
    job_costs: list[dict[str, Any]] = field(default_factory=list)
    tenants: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)


def queue_reports(
    backend: Backend,
    declared: Sequence[JobType],
    queue: str | None,
    tenant: str | None,
    at: float,
) -> list[QueueReport]:
    """Every queue (or ``queue``) with its tenants (or only ``tenant``), judged at ``at``.

    Shares and "in flight" are over all of a queue's tenants even when one tenant is asked for;
    with ``tenant``, only the queues that tenant has a row in are reported.
    """
    if tenant is not None:
        tenant = check_tenant(tenant)
    rows = backend.stats(StatsParams(queue=queue, now=at))
    # every tenant's figures: a queue's rate and the shares behind each ETA need them all
    figures = backend.figures(FiguresParams(queue=queue, now=at))
    costs = backend.job_costs(JobCostsParams(queue=queue))
    sums = summaries(rows, figures, at, costs)
    types = {**backend.job_types(), **{t.name: t for t in declared}}
    hits = throttle_hits(backend, [t for t in types.values() if t.throttle], rows, at)
    judged = status.report(rows, at, hits)
    by_queue: dict[str, list[tuple[TenantStats, status.TenantReport]]] = {}
    for row, verdict in zip(rows, judged, strict=True):
        by_queue.setdefault(row.queue, []).append((row, verdict))
    reports = []
    for name, pairs in by_queue.items():
        chosen = [p for p in pairs if tenant is None or p[0].tenant == tenant]
        if not chosen:
            continue
        report = settings_report(backend.get_queue(GetQueueParams(queue=name)))
        report.tenants = [
            tenant_row(row, verdict, at, sums[(name, row.tenant)]) for row, verdict in chosen
        ]
        report.totals = totals(report.tenants)
        report.in_flight = sum(row.running for row, _ in pairs)
        report.job_costs = [
            {"name": c.name, "runs": c.runs, "estimate": c.estimate}
            for c in costs
            if c.queue == name
        ]
        reports.append(report)
    return reports


def of_tenant(reports: Sequence[QueueReport], tenant: str) -> list[QueueReport]:
    """``reports`` narrowed to ``tenant``'s rows (the queues it has none in left out), the
    queues' shares and in-flight counts still over all their tenants: what
    ``queue_reports(…, tenant)`` gives, from a read already made."""
    tenant = check_tenant(tenant)
    narrowed = []
    for report in reports:
        rows = [row for row in report.tenants if row["tenant"] == tenant]
        if rows:
            narrowed.append(replace(report, tenants=rows, totals=totals(rows)))
    return narrowed


def settings_report(defaults: QueueSettings) -> QueueReport:
    """A report of the queue's settings, with no tenants yet."""
    return QueueReport(
        queue=defaults.queue,
        default_weight=defaults.weight,
        default_max_running=defaults.max_running,
        default_rate=None if defaults.rate is None else str(defaults.rate),
        half_life=defaults.half_life,
        max_debt=defaults.max_debt,
        max_in_flight=defaults.max_in_flight,
    )


def tenant_row(
    row: TenantStats, verdict: status.TenantReport | None, at: float, summary: TenantSummary
) -> dict[str, Any]:
    """One tenant's figures and verdict as shown (and as ``fairq stats --json`` prints them);
    ``summary``: its recent figures (``fairq.reports.figures``)."""
    age = None if row.oldest_ready_at is None else max(0.0, at - row.oldest_ready_at)
    limited = None if verdict is None else verdict.limited_until
    throttle = None if verdict is None or verdict.throttle is None else asdict(verdict.throttle)
    return {
        "tenant": row.tenant,
        "weight": row.weight,
        "max_running": row.max_running,
        "rate": None if row.rate is None else str(row.rate),
        "rate_per_second": None if row.rate is None else row.rate.count / row.rate.period,
        **{name: getattr(row, name) for name in (*COUNTS, *MORE_COUNTS)},
        "oldest_ready_at": row.oldest_ready_at,
        "oldest_ready_age": age,
        "status": status.IDLE if verdict is None else verdict.status,
        "reason": status.IDLE if verdict is None else verdict.reason,
        "share": 0.0 if verdict is None else verdict.share,
        "usage": row.usage,
        "limited_until": limited,
        "limited_until_utc": None if limited is None else format_utc(limited),
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


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts summed over ``rows``, their number, and the longest wait among them."""
    summed: dict[str, Any] = {name: sum(r[name] for r in rows) for name in (*COUNTS, *MORE_COUNTS)}
    ages = [r["oldest_ready_age"] for r in rows if r["oldest_ready_age"] is not None]
    summed["tenants"] = len(rows)
    summed["oldest_ready_age"] = max(ages) if ages else None
    return summed


def format_utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
