"""The figures of one run, from its records alone.

* **wait** of a job: start - arrival. Per tenant: p50, p99, max (nearest rank).
* **backlogged window**: the run is cut into windows of ``window`` seconds; a tenant is
  backlogged in a window when it has a job waiting (arrived, not started) all through it.
* **Jain's index / Gini coefficient**, per window with two or more backlogged tenants, over
  ``x_t`` = worker-seconds tenant ``t`` received in the window / its weight; reported as the
  mean over those windows (and Jain's minimum). 1 and 0 are perfectly fair.
* **service lag**: in each window, a backlogged tenant's ideal service is its weight's share
  of what all backlogged tenants received; lag is ideal minus received, summed over a
  tenant's consecutive backlogged windows. The maximum is the most work (worker-seconds) any
  tenant fell behind weighted fair sharing.
* **utilisation**: busy worker-seconds / (workers x makespan); **makespan**: first arrival to
  last finish. **newcomer first start**: for the workload's newcomers, the longest time from a
  tenant's first arrival to its first start.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fairq.policy.metrics import Waits, jain_index
from fairq.sim.engine import Record


@dataclass(frozen=True, kw_only=True)
class Figures:
    jobs: int
    tenants: int
    waits: Waits  # every job
    worst_tenant_p50: float  # the highest per-tenant median wait
    per_tenant: dict[str, Waits]
    jain_mean: float | None  # None: no window had two backlogged tenants
    jain_min: float | None
    gini_mean: float | None
    windows: int  # windows with two or more backlogged tenants
    window: float
    max_lag: float
    utilisation: float
    makespan: float
    newcomer_first_start: float | None


def waits_of(values: Sequence[float]) -> Waits:
    return Waits.of(values)


def gini(values: Sequence[float]) -> float:
    """Gini coefficient: 0 when all are equal, (n-1)/n when one value holds everything."""
    n = len(values)
    total = sum(values)
    if n == 0 or total == 0:
        return 0.0
    ordered = sorted(values)
    ranked = sum((2 * i - n - 1) * v for i, v in enumerate(ordered, start=1))
    return ranked / (n * total)


def default_window(records: Sequence[Record]) -> float:
    """Ten mean job lengths, but no more than 2,000 windows over the run."""
    if not records:
        return 1.0
    mean = sum(r.job.duration for r in records) / len(records)
    span = max(r.finish for r in records) - min(r.job.arrival for r in records)
    return max(10 * mean, span / 2000, 1e-6)


def figures(
    records: Sequence[Record],
    *,
    workers: int,
    weights: Mapping[str, float] | None = None,
    newcomers: Sequence[str] = (),
    window: float | None = None,
) -> Figures:
    weights = weights or {}
    window = window or default_window(records)
    by_tenant: dict[str, list[Record]] = defaultdict(list)
    tenant_waits: dict[str, list[float]] = defaultdict(list)
    for record in records:
        job = record.job
        by_tenant[job.tenant].append(record)
        tenant_waits[job.tenant].append(record.start - job.arrival)
    per_tenant = {t: waits_of(ws) for t, ws in sorted(tenant_waits.items())}
    first = min((r.job.arrival for r in records), default=0.0)
    makespan = max((r.finish for r in records), default=0.0) - first
    busy = sum(r.finish - r.start for r in records)
    fair = _windowed(by_tenant, window, weights)
    return Figures(
        jobs=len(records),
        tenants=len(by_tenant),
        waits=waits_of([w for ws in tenant_waits.values() for w in ws]),
        worst_tenant_p50=max((w.p50 for w in per_tenant.values()), default=math.nan),
        per_tenant=per_tenant,
        jain_mean=_mean(fair.jain),
        jain_min=min(fair.jain, default=None),
        gini_mean=_mean(fair.gini),
        windows=len(fair.jain),
        window=window,
        max_lag=fair.max_lag,
        utilisation=busy / (workers * makespan) if makespan > 0 else 1.0,
        makespan=makespan,
        newcomer_first_start=_first_start(by_tenant, newcomers),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _first_start(by_tenant: Mapping[str, list[Record]], newcomers: Sequence[str]) -> float | None:
    delays = [
        min(r.start for r in by_tenant[t]) - min(r.job.arrival for r in by_tenant[t])
        for t in newcomers
        if t in by_tenant
    ]
    return max(delays, default=None)


@dataclass(frozen=True)
class _Windowed:
    jain: list[float]
    gini: list[float]
    max_lag: float


def backlogged_windows(records: Sequence[Record], window: float) -> list[int]:
    """The windows all through which this tenant (these are its records) had a job waiting."""
    # At one instant arrivals come first (kind 0): a job starting the instant it arrives never
    # waited, and the count of waiting jobs never goes below zero.
    events = sorted([(r.job.arrival, 0) for r in records] + [(r.start, 1) for r in records])
    found: list[int] = []
    waiting = 0
    since = 0.0
    for at, kind in events:
        if kind == 0:
            if waiting == 0:
                since = at
            waiting += 1
            continue
        waiting -= 1
        if waiting == 0 and at > since:
            found.extend(range(math.ceil(since / window), math.floor(at / window)))
    return found


def served(records: Sequence[Record], window: float) -> dict[int, float]:
    """Worker-seconds these records ran within each window."""
    amounts: dict[int, float] = defaultdict(float)
    for r in records:
        for w in range(math.floor(r.start / window), math.floor(r.finish / window) + 1):
            overlap = min(r.finish, (w + 1) * window) - max(r.start, w * window)
            if overlap > 0:
                amounts[w] += overlap
    return amounts


def _windowed(
    by_tenant: Mapping[str, list[Record]], window: float, weights: Mapping[str, float]
) -> _Windowed:
    backlogged: dict[int, list[str]] = defaultdict(list)
    service: dict[str, dict[int, float]] = {}
    for tenant, records in by_tenant.items():
        windows = backlogged_windows(records, window)
        if windows:
            service[tenant] = served(records, window)
            for w in windows:
                backlogged[w].append(tenant)
    jain: list[float] = []
    ginis: list[float] = []
    lag: dict[str, float] = {}
    last_seen: dict[str, int] = {}
    max_lag = 0.0
    for w in sorted(backlogged):
        tenants = backlogged[w]
        got = {t: service[t].get(w, 0.0) for t in tenants}
        total_weight = sum(weights.get(t, 1.0) for t in tenants)
        total = sum(got.values())
        for t in tenants:
            share = weights.get(t, 1.0) / total_weight
            carried = lag.get(t, 0.0) if last_seen.get(t) == w - 1 else 0.0
            lag[t] = carried + total * share - got[t]
            last_seen[t] = w
            max_lag = max(max_lag, lag[t])
        if len(tenants) >= 2:
            normalised = [got[t] / weights.get(t, 1.0) for t in tenants]
            jain.append(jain_index(normalised))
            ginis.append(gini(normalised))
    return _Windowed(jain=jain, gini=ginis, max_lag=max_lag)
