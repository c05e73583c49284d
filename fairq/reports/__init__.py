"""Reads that combine several store calls for people: the per-tenant "why not running" report.

The verdicts themselves are pure (``fairq.reports.verdicts``); this module only fetches what they
need — stats, and the throttle windows of the jobs whose home queue a row belongs to.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairq.contract import Backend, JobType, StatsParams, TenantStats, ThrottleWindowsParams
from fairq.reports import verdicts as status


def tenant_report(
    backend: Backend,
    declared: Sequence[JobType],
    queue: str | None,
    tenant: str | None,
    now: float,
) -> list[status.TenantReport]:
    """Every (queue, tenant) row (or those of ``queue`` / ``tenant``), judged at ``now``.

    Shares are computed over the whole queue even when one tenant is asked for.
    """
    rows = backend.stats(StatsParams(queue=queue, now=now))
    types = {**backend.job_types(), **{t.name: t for t in declared}}
    hits = throttle_hits(backend, [t for t in types.values() if t.throttle], rows, now)
    reports = status.report(rows, now, hits)
    return [r for r in reports if tenant is None or r.tenant == tenant]


def throttle_hits(
    backend: Backend, throttled: Sequence[JobType], rows: Sequence[TenantStats], now: float
) -> dict[tuple[str, str], status.ThrottleHit]:
    """The matching rule per (home queue, tenant); the first job's when several match."""
    keys = [(t.name, row.tenant) for t in throttled for row in rows if row.queue == t.queue]
    if not keys:
        return {}
    windows = backend.throttle_windows(ThrottleWindowsParams(keys=keys, now=now))
    hits: dict[tuple[str, str], status.ThrottleHit] = {}
    for spec in throttled:
        for row in rows:
            if row.queue != spec.queue:
                continue
            times = windows.get((spec.name, row.tenant), [])
            hit = status.throttle_hit(spec.name, times, now, spec.throttle)
            if hit is not None:
                hits.setdefault((row.queue, row.tenant), hit)
    return hits
