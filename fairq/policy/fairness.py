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

#: Every run is charged at least this many seconds, so instant jobs still take turns.
MIN_CHARGE = 0.001


def start_tag(finish: float, vclock: float) -> float:
    """Tag of a tenant that becomes eligible: an idle tenant banks no credit."""
    return max(finish, vclock)


def finish_after_dispatch(start: float, estimate: float, weight: float) -> float:
    """Charge a handed-out job's estimated cost to its tenant."""
    return start + estimate / weight


def finish_after_run(finish: float, charged: float, charge: float, weight: float) -> float:
    """Replace what a run was charged so far (estimate, heartbeats) by what it really cost.

    A paused tenant (weight 0) is not re-charged: its finish tag waits for it unchanged.
    """
    if weight <= 0:
        return finish
    return finish + (charge - charged) / weight


def charge_progress(
    finish: float, charged: float, elapsed: float, weight: float
) -> tuple[float, float]:
    """At a heartbeat, charge a running job's time beyond what its tenant already paid.

    Returns the new finish tag and the new amount charged, so a ten-minute job does not look
    cheap until it ends.
    """
    if elapsed <= charged or weight <= 0:
        return finish, charged
    return finish + (elapsed - charged) / weight, elapsed


def run_charge(started_at: float, ended_at: float) -> float:
    """Worker-seconds a run is charged: its wall time, at least ``MIN_CHARGE``."""
    return max(ended_at - started_at, MIN_CHARGE)


def is_eligible(
    ready: int, running: int, max_running: int | None, weight: float, limited: bool
) -> bool:
    """May the scheduler pick this tenant now: work waiting, a free slot under its cap,
    not paused (weight 0), and not waiting on its rate limit."""
    return (
        ready > 0 and (max_running is None or running < max_running) and weight > 0 and not limited
    )
