"""Fairness and latency figures used by stats, the demo, and the benchmarks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Waits:
    """How long jobs waited to start: count, median, 99th percentile, longest (NaN: none)."""

    jobs: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Waits:
        return cls(
            jobs=len(values),
            p50=percentile(values, 50),
            p99=percentile(values, 99),
            max=max(values, default=math.nan),
        )


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index: 1.0 when all values are equal, 1/n when one takes everything."""
    if not values:
        return 1.0
    top = max(values)
    if top <= 0:
        return 1.0
    scaled = [v / top for v in values]  # in [0, 1]: tiny values' squares do not underflow
    total = sum(scaled)
    return total * total / (len(scaled) * sum(v * v for v in scaled))


def max_min_shares(capacity: float, demands: dict[str, float]) -> dict[str, float]:
    """Each claimant's max-min fair share of ``capacity`` (water-filling, equal weights): one
    that asks for less than an equal share is owed all it asks for, the others split the rest."""
    shares: dict[str, float] = {}
    left = capacity
    waiting = sorted(demands, key=lambda k: demands[k])
    while waiting:
        equal = left / len(waiting)
        smallest = waiting[0]
        if demands[smallest] > equal:
            shares.update((k, equal) for k in waiting)
            break
        shares[smallest] = demands[smallest]
        left -= demands[smallest]
        waiting.pop(0)
    return shares


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]
