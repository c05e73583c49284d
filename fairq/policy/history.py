"""Recent service, decaying with a half-life: for history-aware fairness and for visibility.

Each tenant's ``usage`` is the worker time it was charged (in virtual seconds, cost / weight),
decaying by half every ``half_life`` seconds. With history-aware fairness on, a tenant that
becomes backlogged starts ``min(usage, max_debt)`` behind the queue's clock instead of level
with it, so a tenant that just had a large batch processed cools down first; the cap keeps the
wait bounded, so it is never starved.
"""

from __future__ import annotations

import math

#: Half-life of the usage shown as "recent share" when a queue sets none for fairness.
DEFAULT_HALF_LIFE = 60.0


def usage_half_life(half_life: float | None) -> float:
    """Usage decays with the queue's half-life, or with the default one (for display) when
    the queue has none."""
    return half_life if half_life is not None else DEFAULT_HALF_LIFE


def decayed(usage: float, since: float, now: float, half_life: float) -> float:
    """``usage`` recorded at ``since``, as it stands at ``now``."""
    if now <= since:
        return usage
    return usage * math.pow(0.5, (now - since) / half_life)


def add_usage(usage: float, since: float, now: float, half_life: float, amount: float) -> float:
    """Decay to ``now``, then add ``amount`` (never below zero: refunds cannot bank credit)."""
    return max(decayed(usage, since, now, half_life) + amount, 0.0)


def history_start(finish: float, vclock: float, debt: float, max_debt: float) -> float:
    """Start tag of a tenant becoming backlogged that carries ``debt`` of recent service."""
    return max(finish, vclock + min(debt, max_debt))
