"""Rate limits per tenant by GCRA: one timestamp per tenant, exact, no window log.

GCRA keeps a *theoretical arrival time* ``tat``. A job may start at ``now`` when
``now >= tat - tolerance``; starting it moves ``tat`` to ``max(tat, now) + interval``. Over any
half-open window of length ``L`` at most ``burst + L / interval`` jobs start, and with the
default ``burst=1`` at most ``L / interval`` (rounded up): never the 2x a fixed window lets
through at its edges. A limited tenant is not polled: it leaves the eligible set and comes back
at exactly ``next_start(tat)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from fairq.errors import ConfigError
from fairq.policy.bounds import check_int, check_seconds, read_int

UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip
#: ASCII digits only (``re.ASCII``): ``\d`` alone would take ``١٠٠/s`` for ``100/s``.
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$", re.ASCII)
MAX_PERIOD = 31 * 86400.0


@dataclass(frozen=True, init=False)
class Rate:
    """At most ``count`` job starts per ``period`` seconds (or a ``timedelta``), ``burst`` of
    them back to back."""

    count: int
    period: float
    burst: int = 1

    def __init__(self, count: int, period: float | timedelta, burst: int = 1) -> None:
        object.__setattr__(self, "count", check_int("a rate's count", count))
        period = check_seconds("a rate's period", period, most=MAX_PERIOD)
        object.__setattr__(self, "period", period)
        object.__setattr__(self, "burst", check_int("a rate's burst", burst))

    @property
    def interval(self) -> float:
        return self.period / self.count

    @property
    def tolerance(self) -> float:
        return self.interval * (self.burst - 1)

    @classmethod
    def parse(cls, text: str, burst: int = 1) -> Rate:
        """``"100/minute"``, ``"5/s"``, ``"1000/hour"``, ``"10/30s"`` (ten per 30 seconds)."""
        match = _RATE.match(text.lower()) if isinstance(text, str) else None
        if match is None or match.group(3) not in UNITS:
            raise ConfigError(
                f"cannot read rate {text!r}: write COUNT/UNIT such as '100/minute', '5/s' or "
                "'10/30s' (units: s, m, h, d, or second, minute, hour, day)"
            )
        count, multiple, unit = match.groups()
        period = (float(multiple) if multiple else 1.0) * UNITS[unit]
        return cls(read_int(count, "a rate's count"), period, burst)

    def __str__(self) -> str:
        text = f"{self.count}/{self.period:g}s"
        return text if self.burst == 1 else f"{text} (burst {self.burst})"


def next_start(tat: float, interval: float, tolerance: float) -> float:
    """The earliest time the next job may start."""
    return tat - tolerance


def after_start(tat: float | None, now: float, interval: float) -> float:
    """The theoretical arrival time once a job starts at ``now``."""
    return (now if tat is None else max(tat, now)) + interval


def limited_until(tat: float | None, now: float, interval: float, tolerance: float) -> float | None:
    """When a tenant that has just started a job may start the next; None if it may now."""
    if tat is None:
        return None
    allowed = next_start(tat, interval, tolerance)
    return allowed if allowed > now else None


def may_start(tat: float | None, now: float, interval: float, tolerance: float) -> bool:
    return tat is None or now >= next_start(tat, interval, tolerance)


def check_rate(rate: object) -> Rate | None:
    if rate is None or isinstance(rate, Rate):
        return rate
    if isinstance(rate, str):
        return Rate.parse(rate)
    raise ConfigError(f"rate must be a string like '100/minute' or a fairq.Rate, got {rate!r}")
