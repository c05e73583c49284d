"""Start-time fair queuing on virtual time: the tag arithmetic every backend shares.

Terms (docs/internals/scheduler.md has the full table of events):

* ``V`` — a queue's virtual clock: the start tag of the last job handed out; never decreases.
* ``F`` — a tenant's finish tag: virtual time its handed-out work is charged up to.
* ``S`` — a tenant's start tag while it is eligible (has ready jobs, is under its cap);
  the scheduler hands out the head job of the eligible tenant with the smallest ``S``
  (ties: the older head job).

Floating-point results must be bit-identical in every store, so each rule is one expression
that Lua and SQL can evaluate in the same order.
"""

from __future__ import annotations

import math

from fairq.errors import ConfigError

#: Every run is charged at least this many seconds, so instant jobs still take turns.
MIN_CHARGE = 0.001


def start_tag(finish: float, vclock: float) -> float:
    """Tag of a tenant that becomes eligible: an idle tenant banks no credit."""
    return max(finish, vclock)


def finish_after_dispatch(start: float, estimate: float, weight: float) -> float:
    """Charge a handed-out job's estimated cost to its tenant."""
    return start + estimate / weight


def finish_after_run(finish: float, estimate: float, charge: float, weight: float) -> float:
    """Replace the estimate charged at dispatch by what the run really cost."""
    return finish + (charge - estimate) / weight


def run_charge(started_at: float, ended_at: float) -> float:
    """Worker-seconds a run is charged: its wall time, at least ``MIN_CHARGE``."""
    return max(ended_at - started_at, MIN_CHARGE)


def is_eligible(ready: int, running: int, max_running: int | None) -> bool:
    """May the scheduler pick this tenant now: work waiting, and a free slot under its cap."""
    return ready > 0 and (max_running is None or running < max_running)


def check_weight(weight: object) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(f"weight must be a positive number, got {weight!r}")
    if not math.isfinite(weight) or weight <= 0:
        raise ConfigError(f"weight must be a positive finite number, got {weight!r}")
    return float(weight)


def check_max_running(cap: object) -> int | None:
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ConfigError(
            f"max_running must be a whole number of at least 1, or None for no cap; got {cap!r}"
        )
    return cap
