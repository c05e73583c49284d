"""Retry back-off: exponential with jitter, so a failing dependency is not hammered in step."""

from __future__ import annotations

import random


def backoff(
    attempt: int,
    *,
    base: float = 1.0,
    cap: float = 3600.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before retrying after failed attempt number ``attempt`` (1-based).

    The nominal delay doubles per attempt up to ``cap``; the wait is drawn uniformly from its
    upper half ("equal jitter"), so retries spread out but never come back too early.
    """
    doublings = min(max(attempt - 1, 0), 64)  # past 2**64 every base is over any cap
    nominal = min(cap, base * 2.0**doublings)
    draw: float = (rng or random).random()
    return nominal / 2 + draw * nominal / 2
