"""Wait and run-time figures per tenant: fixed-bucket histograms over a sliding window.

Pure rules, no I/O. Every store records, per (queue, tenant, time slot), how many dispatches
waited (``now - ready_at``) and how many runs took (``ended - started_at``) a time in each
bucket, and how many runs ended by each outcome. The buckets are fixed and the same in every
store and process, so histograms add up bucket by bucket (``merge``): any process reads the
same figures, and memory per tenant is bounded by ``SLOTS`` times the buckets in use, never by
the number of jobs. Redis's Lua gets the number of bounds from here (scripts.py); PostgreSQL's
functions/figures.sql repeats the bounds and the slot length; the conformance suite checks
that every store buckets every bound alike (tests/conformance/test_figures.py).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Upper bounds (seconds) of the buckets: 1 ms × 2^k up to 2^27 ms (about 37 hours). Bucket
#: ``i`` holds values in (BOUNDS[i-1], BOUNDS[i]] (bucket 0: up to 1 ms, negatives included);
#: one more bucket, ``OVERFLOW``, holds everything above the last bound. Each bound is exact
#: in any language (a power of two times the double nearest 0.001), so every store buckets a
#: value alike.
BOUNDS: tuple[float, ...] = tuple(0.001 * 2.0**k for k in range(28))
OVERFLOW = len(BOUNDS)
BUCKETS = len(BOUNDS) + 1

#: The recent window: SLOTS slots of SLOT seconds each (slot n covers [n·SLOT, (n+1)·SLOT)).
#: The figures read at ``now`` are those of the slot of ``now`` and the SLOTS - 1 before it.
SLOT = 60.0
SLOTS = 10
WINDOW = SLOT * SLOTS

#: How runs end, as counted: acked, failed by the worker, their lease ran out, or ended by
#: their worker after a cancel request (fairq.cancel; a job cancelled before it ran had no run
#: and is counted in TenantStats.cancelled alone). New outcomes go at the end: stores keep
#: the index.
SUCCEEDED, FAILED, EXPIRED, CANCELLED = "succeeded", "failed", "expired", "cancelled"
OUTCOMES: tuple[str, ...] = (SUCCEEDED, FAILED, EXPIRED, CANCELLED)

Counts = tuple[int, ...]  # one count per bucket, BUCKETS long


def bucket_of(seconds: float) -> int:
    """The bucket of a duration: how many bounds are below it (so a bound is its own
    bucket's top)."""
    return bisect_left(BOUNDS, seconds)


def slot_of(now: float) -> int:
    return math.floor(now / SLOT)


def first_slot(now: float) -> int:
    """The oldest slot still in the window at ``now``; older ones may be deleted."""
    return slot_of(now) - SLOTS + 1


def empty() -> Counts:
    return (0,) * BUCKETS


def counts_of(buckets: Mapping[int, int]) -> Counts:
    """A histogram from sparse ``{bucket: count}`` (what stores keep)."""
    found = [0] * BUCKETS
    for bucket, count in buckets.items():
        found[bucket] += count
    return tuple(found)


def histogram_of(seconds: Iterable[float]) -> Counts:
    found = [0] * BUCKETS
    for value in seconds:
        found[bucket_of(value)] += 1
    return tuple(found)


def merge(a: Sequence[int], b: Sequence[int]) -> Counts:
    """Two histograms as one (bucket by bucket): associative and commutative."""
    return tuple(x + y for x, y in zip(a, b, strict=True))


def total(counts: Sequence[int]) -> int:
    return sum(counts)


def quantile(counts: Sequence[int], q: float) -> float | None:
    """The ``q``-quantile (0 < q <= 1) of a histogram, as the **upper bound of the bucket**
    holding the observation of rank ceil(q·n): an answer never below the true value, and at
    most twice it (the buckets double). An observation in the overflow bucket reports
    ``math.inf`` (more than the last bound). None for an empty histogram."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must be in (0, 1], got {q!r}")
    n = total(counts)
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    seen = 0
    for bucket, count in enumerate(counts):
        seen += count
        if seen >= rank:
            return BOUNDS[bucket] if bucket < OVERFLOW else math.inf
    raise AssertionError("unreachable: rank <= n")  # pragma: no cover


def per_minute(count: int, window: float) -> float | None:
    """A count over ``window`` seconds as a rate per minute (None: no time covered)."""
    return None if window <= 0 else count * 60.0 / window


@dataclass(frozen=True, kw_only=True)
class Share:
    """What bounds how fast a backlogged tenant's jobs start: its weight among the backlogged
    tenants' weights, and its own cap and rate limit."""

    weight: float
    backlogged_weight: float  # the sum over the queue's tenants with ready jobs, its own included
    max_running: int | None = None
    running: int = 0
    rate_per_second: float | None = None  # its rate limit's count / period
    limited_for: float = 0.0  # seconds until its rate limit lets it start again
    mean_run: float | None = None  # its recent mean run time (seconds), for its cap


def eta(share: Share, queue_starts_per_second: float) -> float | None:
    """An **estimate** of the seconds until a tenant's oldest ready job starts.

    The oldest ready job is at the head of its tenant's FIFO (priorities aside), so it starts
    at the tenant's next turn. Its turns come at its share of the queue's recent start rate
    (``weight / backlogged_weight`` of it), at most its rate limit, and, when it is at its
    cap, at most ``max_running / mean_run``; a tenant held by its rate limit waits that long
    first. None when nothing can be estimated: no recent starts in the queue, or a paused
    tenant (weight 0). It assumes the recent past goes on: a flood arriving, a cap or weight
    changed, or workers added make it wrong, which is why it is shown as an estimate.
    """
    if share.weight <= 0 or share.backlogged_weight <= 0 or queue_starts_per_second <= 0:
        return None
    rate = queue_starts_per_second * min(1.0, share.weight / share.backlogged_weight)
    if share.rate_per_second is not None:
        rate = min(rate, share.rate_per_second)
    capped = share.max_running is not None and share.running >= share.max_running
    if capped and share.mean_run is not None and share.mean_run > 0:
        rate = min(rate, (share.max_running or 0) / share.mean_run)
    return max(share.limited_for, 0.0) + 1.0 / rate


def mean_of(counts: Sequence[int]) -> float | None:
    """A histogram's mean, each observation taken at its bucket's middle (an estimate; the
    overflow bucket counts as its lower bound)."""
    n = total(counts)
    if n == 0:
        return None
    lows = (0.0, *BOUNDS)
    tops = (*BOUNDS, BOUNDS[-1])
    return sum(c * (lows[i] + tops[i]) / 2.0 for i, c in enumerate(counts)) / n
