"""Each tenant's recent figures read as a person wants them: wait p50/p99, jobs started per
minute, and an estimate of when its oldest ready job starts (``fairq.policy.histogram``).

Shared by ``fairq stats``, the dashboard and the metrics endpoint, so all three show the same
numbers for the same store and moment.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fairq.contract import JobCost, TenantStats
from fairq.figures import TenantFigures
from fairq.policy import histogram


@dataclass(frozen=True, kw_only=True)
class TenantSummary:
    queue: str
    tenant: str
    wait_p50: float | None  # seconds (a bucket's upper bound: histogram.quantile); inf: over
    wait_p99: float | None
    started_per_minute: float | None  # None: no time covered yet
    ended: dict[str, int]  # runs ended in the window, by outcome
    eta: float | None  # an estimate, seconds from now; None: nothing ready, or unknown
    window: float


def summaries(
    stats: Sequence[TenantStats],
    figures: Sequence[TenantFigures],
    now: float,
    costs: Sequence[JobCost] = (),
) -> dict[tuple[str, str], TenantSummary]:
    """One summary per (queue, tenant) in ``stats`` (those without figures have empty ones).

    The ETA of a tenant with ready jobs is ``histogram.eta`` of its weight among the weights
    of its queue's tenants with ready jobs (all of them must be in ``stats``: read the whole
    queue), its rate limit and cap, and its queue's starts per second over the window. A
    capped tenant's runs are taken to last its queue's learned run time (``costs``: the mean
    of its job names' estimates, fairq.policy.cost), else its recent runs' mean.
    """
    learned: dict[str, list[float]] = defaultdict(list)
    for cost in costs:
        learned[cost.queue].append(cost.estimate)
    found = {(f.queue, f.tenant): f for f in figures}
    starts: dict[str, int] = defaultdict(int)
    windows: dict[str, float] = {}
    for fig in figures:
        starts[fig.queue] += fig.started
        windows[fig.queue] = max(windows.get(fig.queue, 0.0), fig.window)
    backlogged: dict[str, float] = defaultdict(float)
    for row in stats:
        if row.ready > 0:
            backlogged[row.queue] += row.weight
    out: dict[tuple[str, str], TenantSummary] = {}
    for row in stats:
        seen = found.get((row.queue, row.tenant))
        window = windows.get(row.queue, 0.0)
        wait = histogram.empty() if seen is None else seen.wait
        rate = 0.0 if window <= 0 else starts[row.queue] / window
        out[(row.queue, row.tenant)] = TenantSummary(
            queue=row.queue,
            tenant=row.tenant,
            wait_p50=histogram.quantile(wait, 0.5),
            wait_p99=histogram.quantile(wait, 0.99),
            started_per_minute=histogram.per_minute(histogram.total(wait), window),
            ended={} if seen is None else dict(seen.outcomes),
            eta=_eta(row, seen, backlogged[row.queue], rate, now, learned.get(row.queue))
            if row.ready > 0
            else None,
            window=window,
        )
    return out


def _eta(
    row: TenantStats,
    fig: TenantFigures | None,
    backlogged: float,
    rate: float,
    now: float,
    learned: Sequence[float] | None,
) -> float | None:
    limited_for = 0.0 if row.limited_until is None else max(0.0, row.limited_until - now)
    mean_run = sum(learned) / len(learned) if learned else None
    if mean_run is None and fig is not None:
        mean_run = histogram.mean_of(fig.run)
    share = histogram.Share(
        weight=row.weight,
        backlogged_weight=backlogged,
        max_running=row.max_running,
        running=row.running,
        rate_per_second=None if row.rate is None else row.rate.count / row.rate.period,
        limited_for=limited_for,
        mean_run=mean_run,
    )
    return histogram.eta(share, rate)
