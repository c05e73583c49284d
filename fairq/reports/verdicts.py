"""Why a tenant is not running: one verdict per (queue, tenant), from what the store reports.

Pure: it reads ``TenantStats`` rows and throttle windows that the caller fetched, and the time.
The verdicts, first that applies:

* ``paused`` — weight 0: its jobs wait, nothing is lost;
* ``capped`` — it has ready jobs but ``running`` is at its ``max_running``;
* ``rate-limited`` — it has ready jobs but its rate allows the next start only at ``T``;
* ``throttled`` — its recent enqueues of a job homed here match a throttle rule, so new ones go
  to the rule's queue (the count is what the rule sees now);
* ``running`` — some of its jobs run and nothing above holds it back;
* ``waiting its turn`` — ready and eligible: the fair scheduler serves others first;
* ``idle`` — nothing ready (perhaps scheduled for later).

``share`` is the tenant's part of the queue's recent *worker-seconds*: each tenant's recent
service in worker-seconds (its ``usage``, which the store keeps in virtual seconds — worker
time divided by weight — times its weight) over the sum of all its queue's tenants', every
second of work counting half after the queue's half-life (60 s when it has none), running jobs
counted as they are charged. It answers "who got the workers lately": a tenant that held every
worker shows about 100 % whatever the weights. (Exact while the weights stayed as they are over
the last few half-lives; a paused tenant shows 0.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from fairq.contract import TenantStats
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle, window_size

PAUSED = "paused"
CAPPED = "capped"
RATE_LIMITED = "rate-limited"
THROTTLED = "throttled"
RUNNING = "running"
WAITING = "waiting its turn"
IDLE = "idle"


@dataclass(frozen=True)
class ThrottleHit:
    """A throttle rule that matches a tenant's recent enqueues of ``job`` right now."""

    job: str
    count: int  # enqueues in the last ``per`` seconds, as far as the window can tell
    threshold: int
    per: float
    queue: str
    #: The store keeps only the newest ``max threshold + 1`` times; when all of them fall in
    #: the rule's span the real count may be higher: shown as "≥ count".
    at_least: bool = False


@dataclass(frozen=True, kw_only=True)
class TenantReport:
    """One (queue, tenant): its verdict, the reason in words, and the figures behind it."""

    queue: str
    tenant: str
    status: str  # one of the verdicts above
    reason: str  # the verdict with its figures, e.g. "capped (2/2 running)"
    weight: float
    max_running: int | None
    rate: Rate | None
    ready: int
    scheduled: int
    running: int
    limited_until: float | None  # rate-limited: when it may start again
    throttle: ThrottleHit | None
    usage: float  # recent service (virtual seconds), decayed to the report's time
    share: float  # its part of the queue's recent worker-seconds; 0 when nobody was served


def throttle_hit(
    job: str, times: Sequence[float], now: float, rules: Sequence[Throttle]
) -> ThrottleHit | None:
    """The rule an enqueue now would see matching (the last that matches, as routing picks)."""
    hit = None
    full = len(times) >= window_size(rules)
    for rule in rules:
        count = sum(1 for t in times if now - rule.per <= t <= now)
        if count > rule.threshold:
            at_least = full and count == len(times)
            hit = ThrottleHit(job, count, rule.threshold, rule.per, rule.queue, at_least)
    return hit


def verdict(row: TenantStats, now: float, hit: ThrottleHit | None) -> tuple[str, str]:
    """``(status, reason)`` for one row; see the module docstring for the order."""
    if row.weight == 0:
        return PAUSED, "paused (weight 0)"
    if row.ready and row.max_running is not None and row.running >= row.max_running:
        return CAPPED, f"capped ({row.running}/{row.max_running} running)"
    if row.ready and row.limited_until is not None and row.limited_until > now:
        at = format_clock(row.limited_until)
        wait = row.limited_until - now
        return RATE_LIMITED, f"rate-limited (eligible again at {at}, in {wait:.1f}s)"
    if hit is not None:
        count = f"≥{hit.count}" if hit.at_least else str(hit.count)
        per = format_span(hit.per)
        return THROTTLED, f"throttled ({count} in last {per} > {hit.threshold} → {hit.queue})"
    if row.running:
        return RUNNING, "running"
    if row.ready:
        return WAITING, "waiting its turn"
    return IDLE, "idle"


def shares(seconds: Mapping[str, float]) -> dict[str, float]:
    """Each tenant's part of the total; all 0 when the total is 0."""
    total = sum(seconds.values())
    return {t: (u / total if total > 0 else 0.0) for t, u in seconds.items()}


def worker_seconds(row: TenantStats) -> float:
    """A tenant's recent service in worker-seconds: its usage (virtual: worker time / weight)
    times its weight."""
    return row.usage * row.weight


def report(
    rows: Iterable[TenantStats], now: float, hits: Mapping[tuple[str, str], ThrottleHit]
) -> list[TenantReport]:
    """A report per row (same order); ``hits`` by (queue, tenant) for the queue jobs call home."""
    rows = list(rows)
    by_queue: dict[str, dict[str, float]] = {}
    for row in rows:
        by_queue.setdefault(row.queue, {})[row.tenant] = worker_seconds(row)
    share_of = {q: shares(u) for q, u in by_queue.items()}
    reports = []
    for row in rows:
        hit = hits.get((row.queue, row.tenant))
        status, reason = verdict(row, now, hit)
        reports.append(
            TenantReport(
                queue=row.queue,
                tenant=row.tenant,
                status=status,
                reason=reason,
                weight=row.weight,
                max_running=row.max_running,
                rate=row.rate,
                ready=row.ready,
                scheduled=row.scheduled,
                running=row.running,
                limited_until=_future(row.limited_until, now),
                throttle=hit,
                usage=row.usage,
                share=share_of[row.queue][row.tenant],
            )
        )
    return reports


def _future(ts: float | None, now: float) -> float | None:
    return ts if ts is not None and ts > now else None


def format_clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%H:%M:%S UTC")


def format_span(seconds: float) -> str:
    """``3600`` → ``1h``, ``86400`` → ``1d``, ``90`` → ``90s``: how rules are usually written."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
