"""What a store shows of itself: per-tenant stats, jobs by id, dead jobs (and their requeue),
learned costs and throttle windows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairq.policy.rate import Rate


@dataclass(frozen=True, kw_only=True)
class StatsParams:
    queue: str | None = None
    tenant: str | None = None
    now: float | None = None  # decay ``usage`` to this time; None: as last recorded


@dataclass(frozen=True, kw_only=True)
class TenantStats:
    """One (queue, tenant): effective settings, current counts, lifetime counters."""

    queue: str
    tenant: str
    weight: float
    max_running: int | None
    ready: int
    scheduled: int
    running: int
    succeeded: int  # lifetime
    failed: int  # lifetime count of failed attempts (errors and expired leases)
    dead: int  # current
    oldest_ready_at: float | None  # when the longest-waiting ready job became ready
    rate: Rate | None = None  # effective rate limit
    limited_until: float | None = None  # rate-limited: eligible again at this time
    usage: float = 0.0  # recent service (virtual seconds), decayed to StatsParams.now
    cancelled: int = 0  # lifetime count of jobs cancelled (fairq.cancel)


@dataclass(frozen=True, kw_only=True)
class JobCostsParams:
    queue: str | None = None  # None: every queue


@dataclass(frozen=True, kw_only=True)
class GetJobsParams:
    ids: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class ListDeadParams:
    queue: str | None = None
    tenant: str | None = None
    limit: int = 100


@dataclass(frozen=True, kw_only=True)
class RequeueParams:
    ids: Sequence[str]
    now: float


@dataclass(frozen=True, kw_only=True)
class ThrottleWindowsParams:
    keys: Sequence[tuple[str, str]]  # (job name, tenant)
    now: float
