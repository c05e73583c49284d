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
* **contended share**: a tenant's part of the worker-seconds of the windows where two or more
  tenants were backlogged (what a weight or a cap changes).
* **share error**: the part of all worker-seconds that went to a tenant beyond its weighted
  fair share while another wanted them. In each window where some tenant was backlogged, the
  fair split of what every tenant received is weighted water-filling (``misallocated``); the
  error is the sum over windows of sum(|received - fair|) / 2, over the busy worker-seconds
  of the run. 0: always by weight; near 1: tenants that wanted more got none of it.
* **utilisation**: busy worker-seconds / (workers x makespan); **makespan**: first arrival to
  last finish. **newcomer first start**: for the workload's newcomers, the longest time from a
  tenant's first arrival to its first start.
* **starvation**: the longest time any tenant had a job waiting (arrived, or handed back
  between two parts, and not running) while none of its jobs ran; and that tenant.
* **efficiency**: the worker-seconds used / the worker-seconds the work could have used, the
  integral over time of min(workers, jobs running + jobs waiting). 100 % is work-conserving:
  no worker ever idle while a job waited.
* **makespan bound**: no schedule finishes sooner: the longest of (a job's arrival + its run
  time) and (an arrival instant + all the work arriving from then on / workers), from the
  first arrival. Makespan / bound is what the order cost at the end of the run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fairq.policy.metrics import Waits, jain_index
from fairq.sim.engine import Outage, Record, SimJob


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
    #: Each tenant's part of the worker-seconds of the windows with two or more backlogged
    #: tenants: who was favoured while tenants competed (over the whole run every tenant gets
    #: its own work done, so its part of all worker time is the same under any order).
    contended_share: dict[str, float]
    share_error: float
    utilisation: float
    efficiency: float
    makespan: float
    makespan_bound: float
    newcomer_first_start: float | None
    starvation: float
    starved_tenant: str | None


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
    whole: bool = True,
) -> Figures:
    """``whole=False`` leaves out starvation, efficiency and the makespan bound (NaN, 0, None):
    what a replay does not report (fairq/sim/whatif.py), a third of the time at 10^6 jobs."""
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
    busy = sum(
        r.finish - r.start if not r.parts else sum(e - s for s, e in r.parts) for r in records
    )
    fair = _windowed(by_tenant, window, weights)
    starved, starved_tenant = _most_starved(by_tenant, per_tenant) if whole else (math.nan, None)
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
        contended_share=fair.contended_share,
        share_error=sum(fair.misallocated) / busy if busy > 0 else 0.0,
        utilisation=busy / (workers * makespan) if makespan > 0 else 1.0,
        efficiency=efficiency(records, workers) if whole else math.nan,
        makespan=makespan,
        makespan_bound=makespan_bound([r.job for r in records], workers) if whole else math.nan,
        newcomer_first_start=_first_start(by_tenant, newcomers),
        starvation=starved,
        starved_tenant=starved_tenant,
    )


@dataclass(frozen=True, kw_only=True)
class Held:
    """What an outage held: jobs that arrived before it ended and started only after, on one
    of its workers (with a pool per shard: jobs left in the hung pool's shard), per tenant."""

    jobs: int
    tenants: dict[str, int]  # tenant -> its jobs held
    arrived: dict[str, int]  # tenant -> its jobs arrived during the outage (held tenants only)
    worst_wait: float


def held(records: Sequence[Record], outage: Outage) -> Held:
    tenants: dict[str, int] = defaultdict(int)
    worst = 0.0
    for r in records:
        if r.job.arrival < outage.end <= r.start and r.worker in outage.workers:
            tenants[r.job.tenant] += 1
            worst = max(worst, r.wait)
    arrived: dict[str, int] = defaultdict(int)
    for r in records:
        if r.job.tenant in tenants and outage.start <= r.job.arrival < outage.end:
            arrived[r.job.tenant] += 1
    return Held(
        jobs=sum(tenants.values()),
        tenants=dict(sorted(tenants.items())),
        arrived=dict(sorted(arrived.items())),
        worst_wait=worst,
    )


def makespan_bound(jobs: Sequence[SimJob], workers: int) -> float:
    """The shortest makespan any schedule could have (module docstring)."""
    if not jobs:
        return 0.0
    first = min(j.arrival for j in jobs)
    bound = max(j.arrival + j.duration for j in jobs)
    later = 0.0  # work arriving at or after the instant at hand
    for job in sorted(jobs, key=lambda j: -j.arrival):
        later += job.duration
        bound = max(bound, job.arrival + later / workers)
    return bound - first


def _readies(record: Record) -> list[float]:
    """When the job became ready for each of its runs: its arrival, then each part's end."""
    return [record.job.arrival, *(end for _, end in record.parts[:-1])]


def _spans(records: Sequence[Record]) -> list[tuple[float, int, int]]:
    """(time, change of jobs waiting, change of jobs running) for every wait and run."""
    changes: list[tuple[float, int, int]] = []
    add = changes.append
    for r in records:
        if not r.parts:  # the common case, without building lists
            add((r.job.arrival, 1, 0))
            add((r.start, -1, 1))
            add((r.finish, 0, -1))
            continue
        for ready, (start, end) in zip(_readies(r), r.parts, strict=True):
            changes += [(ready, 1, 0), (start, -1, 1), (end, 0, -1)]
    changes.sort()
    return changes


def starvation(records: Sequence[Record]) -> float:
    """The longest time these records' tenant had a job waiting and none running."""
    waiting = running = 0
    since: float | None = None
    longest = 0.0
    changes = _spans(records)
    for i, (at, dwait, drun) in enumerate(changes):
        waiting += dwait
        running += drun
        if i + 1 < len(changes) and changes[i + 1][0] == at:
            continue  # every change of an instant first
        if waiting > 0 and running == 0:
            since = at if since is None else since
        elif since is not None:
            longest = max(longest, at - since)
            since = None
    return longest


def _most_starved(
    by_tenant: Mapping[str, list[Record]], per_tenant: Mapping[str, Waits]
) -> tuple[float, str | None]:
    """The longest starvation and its tenant. A tenant whose jobs each ran whole starved at
    most its longest wait (no job starts during a starvation, so the job waiting when it
    began waited all through it): tenants are visited by that bound, longest first, until
    it cannot beat what was found."""
    bound = {
        t: math.inf if any(r.parts for r in own) else per_tenant[t].max
        for t, own in by_tenant.items()
    }
    starved, starved_tenant = 0.0, None
    for tenant in sorted(bound, key=lambda t: -bound[t]):
        if bound[tenant] <= starved:
            break
        longest = starvation(by_tenant[tenant])
        if longest > starved:
            starved, starved_tenant = longest, tenant
    return starved, starved_tenant


def efficiency(records: Sequence[Record], workers: int) -> float:
    """Worker-seconds used over those the work could have used (module docstring). A job
    wants a worker from its arrival to its finish, waiting or running (between its parts
    too), so the usable worker-seconds are the integral of min(workers, jobs present)."""
    arrivals = sorted(r.job.arrival for r in records)
    finishes = sorted(r.finish for r in records)
    used = sum(
        r.finish - r.start if not r.parts else sum(e - s for s, e in r.parts) for r in records
    )
    usable = 0.0
    present = a = f = 0
    last = arrivals[0] if arrivals else 0.0
    while f < len(finishes):
        at = arrivals[a] if a < len(arrivals) and arrivals[a] <= finishes[f] else finishes[f]
        usable += min(workers, present) * (at - last)
        last = at
        if a < len(arrivals) and arrivals[a] == at:
            present += 1
            a += 1
        else:
            present -= 1
            f += 1
    return min(used / usable, 1.0) if usable > 0 else 1.0  # min: float rounding only


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
    misallocated: list[float]  # worker-seconds, per window where some tenant was backlogged
    max_lag: float
    contended_share: dict[str, float]


def backlogged_windows(records: Sequence[Record], window: float) -> list[int]:
    """The windows all through which this tenant (these are its records) had a job waiting."""
    # At one instant arrivals come first (kind 0): a job starting the instant it arrives never
    # waited, and the count of waiting jobs never goes below zero.
    events: list[tuple[float, int]] = []
    for r in records:
        if r.parts:
            events += [(ready, 0) for ready in _readies(r)]
            events += [(start, 1) for start, _ in r.parts]
        else:
            events += [(r.job.arrival, 0), (r.start, 1)]
    events.sort()
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
        for start, end in r.parts or ((r.start, r.finish),):
            spread(amounts, start, end, window)
    return amounts


def spread(amounts: dict[int, float], start: float, end: float, window: float) -> None:
    """Add the run from ``start`` to ``end`` to the worker-seconds of each window it spans."""
    first, last = math.floor(start / window), math.floor(end / window)
    if first == last:  # the common case: within one window
        amounts[first] += end - start
        return
    for w in range(first, last + 1):
        overlap = min(end, (w + 1) * window) - max(start, w * window)
        if overlap > 0:
            amounts[w] += overlap


def _windowed(
    by_tenant: Mapping[str, list[Record]], window: float, weights: Mapping[str, float]
) -> _Windowed:
    backlogged: dict[int, list[str]] = defaultdict(list)
    service: dict[str, dict[int, float]] = {}
    for tenant, records in by_tenant.items():
        service[tenant] = served(records, window)
        for w in backlogged_windows(records, window):
            backlogged[w].append(tenant)
    return windowed(backlogged, service, weights)


def windowed(
    backlogged: Mapping[int, list[str]],
    service: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
) -> _Windowed:
    """The fairness figures from each window's backlogged tenants and each tenant's
    worker-seconds per window (module docstring)."""
    present: dict[int, list[str]] = defaultdict(list)  # tenants served in each window
    for tenant, amounts in service.items():
        for w in amounts:
            present[w].append(tenant)
    jain: list[float] = []
    ginis: list[float] = []
    errors: list[float] = []
    lag: dict[str, float] = {}
    last_seen: dict[str, int] = {}
    max_lag = 0.0
    contended: dict[str, float] = defaultdict(float)
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
            for t in present[w]:
                contended[t] += service[t][w]
        satisfied = {t: service[t][w] for t in present[w] if t not in got}
        if satisfied or len(tenants) >= 2:
            errors.append(misallocated(got, satisfied, weights))
    total = sum(contended.values())
    shares = {t: v / total for t, v in sorted(contended.items())} if total > 0 else {}
    return _Windowed(
        jain=jain, gini=ginis, misallocated=errors, max_lag=max_lag, contended_share=shares
    )


def misallocated(
    backlogged: Mapping[str, float], satisfied: Mapping[str, float], weights: Mapping[str, float]
) -> float:
    """The worker-seconds of a window that went to a tenant beyond its weighted fair share.

    ``backlogged``: what each tenant that had a job waiting all through the window received
    (it wanted more); ``satisfied``: what each other tenant served in it received (all it
    wanted). The fair split of the total is weighted water-filling: a satisfied tenant's
    ideal is what it received, up to its weight's part of the level; the backlogged share the
    rest by weight. Returns sum(|received - fair|) / 2: 0 when the split was fair.
    """
    left = sum(backlogged.values()) + sum(satisfied.values())
    weight = sum(weights.get(t, 1.0) for t in (*backlogged, *satisfied))
    ideal: dict[str, float] = {}
    for t in sorted(satisfied, key=lambda t: satisfied[t] / weights.get(t, 1.0)):
        if satisfied[t] / weights.get(t, 1.0) > left / weight:
            break  # this one and the rest are capped by the level, as the backlogged are
        ideal[t] = satisfied[t]
        left -= satisfied[t]
        weight -= weights.get(t, 1.0)
    received = {**backlogged, **satisfied}
    level = left / weight
    off = (abs(got - ideal.get(t, level * weights.get(t, 1.0))) for t, got in received.items())
    return sum(off) / 2
