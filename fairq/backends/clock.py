"""Whose clock stamps an event: the store's (the default) or the caller's.

The time of an event is the time the store performs it (docs/internals/scheduler.md, "Why
these rules"). A call built before a wait — for a lock, a reconnect, a re-send after an outage —
carries a ``now`` that is already past when the store acts on it: a lease handed out at that
``now`` started in the past, and a run's charge includes the wait. So every store, by default,
performs each event at ``max(now, its own clock)``, read once it holds the event's locks
(SQLite: after ``BEGIN IMMEDIATE``; Redis: the server's ``TIME``; PostgreSQL:
``clock_timestamp()`` after the locks).

``?clock=caller`` keeps the caller's ``now`` exactly. It is for a virtual clock: the
conformance suite and the simulator drive every store on one, so its times are small numbers
that a real clock would overrule.
"""

from __future__ import annotations

from enum import Enum

from fairq.errors import ConfigError


class Clock(str, Enum):
    STORE = "store"  # an event's time is max(now, the store's clock when it performs it)
    CALLER = "caller"  # an event's time is the caller's now, exactly (virtual clocks)

    def __str__(self) -> str:
        return self.value


def parse_clock(value: str | None) -> Clock:
    """The ``clock`` URL option; ConfigError naming the choices for anything else."""
    if value is None:
        return Clock.STORE
    try:
        return Clock(value)
    except ValueError:
        raise ConfigError(
            f"clock={value!r} in the store URL is not a choice: use clock=store (the default: "
            "each event happens at the store's time) or clock=caller (the caller's `now` "
            "exactly, for a virtual clock in tests or simulations)"
        ) from None
