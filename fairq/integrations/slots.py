"""The tenant slots one peer worker process holds, and the one thread that renews them.

Celery's ``SlotTask``, RQ's ``@fair.guard(slots=…)`` and Dramatiq's ``routed_actor(slots=True)``
all run a job only while its tenant holds a slot in the store (``Backend.acquire_slot``): a
lease, so a killed worker's slot frees when it runs out. This keeper takes the slot, renews
every slot this process holds (every third of the shortest lease) while its jobs run, and gives
it back when the job ends. It is fork-safe: ``store`` returns the calling process's own store
connection, and a forked child (a prefork pool's, an RQ work horse) starts its own thread.

A job refused a slot is parked in the store (``park``: what the peer needs to publish it
again) and also sent again for later by its peer (the timed copy, so it comes back on its own
even if nobody wakes it). The process that releases a slot publishes the oldest parked job of
that tenant at once (``wake``, the peer's publish), so a freed slot starts the next waiting job
within the peer's own latency. Every copy carries the job's place in line; the store lets the
first copy to get a slot run and tells any later one that it is ``gone``. A job whose timed
copy the broker refused leaves the line (``leave``) before its peer gives it back to the broker
as it was (that requeue carries no place): so a woken copy cannot run it a second time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from fairq.contract import (
    AcquireSlotParams,
    Backend,
    LeaveLineParams,
    ReleaseSlotsParams,
    RenewSlotsParams,
    SlotResult,
    Woken,
)
from fairq.worker.joblog import describe
from fairq.worker.keeper import LeaseKeeper

log = logging.getLogger("fairq.integrations")


class SlotKeeper:
    """Takes, renews and gives back tenant slots for the jobs of this process."""

    def __init__(
        self,
        store: Callable[[], Backend],
        clock: Callable[[], float] = time.time,
        wake: Callable[[Woken], None] | None = None,
    ) -> None:
        self._store = store
        self.clock = clock
        self._wake = wake  # the peer's publish of a parked job a release woke
        self._keeper: LeaseKeeper[str] = LeaseKeeper(
            self._renew, name="fairq-slots", lost=self._lapsed
        )

    def acquire(
        self,
        queue: str,
        tenant: str,
        holder: str,
        lease: float,
        limit: int | None = None,
        *,
        waiter: str | None = None,
        park: str | None = None,
    ) -> SlotResult:
        """A slot of ``tenant`` in ``queue``, held (and renewed) until ``release``; or the
        refusal (``token`` None, ``free_at``: when the earliest held slot's lease ends;
        ``waiter``: the job's place in line when ``park`` was given); or ``gone``: the
        ``waiter`` given left the line, another copy of this job ran (AcquireSlotParams)."""
        result = self._store().acquire_slot(
            AcquireSlotParams(
                queue=queue,
                tenant=tenant,
                holder=holder,
                lease=lease,
                now=self.clock(),
                limit=limit,
                waiter=waiter,
                park=park,
            )
        )
        if result.token is not None:
            self._keeper.hold(result.token, result.token, lease)
        return result

    def release(self, token: str | None) -> None:
        """Give a slot back and publish the parked job it wakes (a failure is logged: the slot
        then frees when its lease ends; the parked job comes back with its timed copy)."""
        if token is None:
            return
        self._keeper.drop(token)
        try:
            result = self._store().release_slots(
                ReleaseSlotsParams(tokens=[token], now=self.clock())
            )
        except Exception as exc:
            log.error("a tenant slot was not given back (%s); it frees at its lease", describe(exc))
            return
        for woken in result.wake:
            self.publish(woken)

    def publish(self, woken: Woken) -> None:
        if self._wake is None:
            return
        try:
            self._wake(woken)
        except Exception as exc:
            log.error(
                "a job waiting for a tenant slot was not woken (%s); its timed copy brings it back",
                describe(exc),
            )

    def leave(self, queue: str, tenant: str, place: str | None, carried: str | None) -> bool:
        """Before a peer gives a job whose timed copy could not be sent back to its broker as
        it came (carrying ``carried``, its place when it was a copy already): a job parked by
        this refusal (at ``place``) leaves its line, since what is given back carries no place.
        True: give it back (it is the job's only copy, or a copy in line like the others);
        False: a copy of it took a slot and runs it, so drop it. With the store unreachable
        too it is given back (logged: it may run twice)."""
        if place is None or carried is not None:
            return True
        try:
            params = LeaveLineParams(queue=queue, tenant=tenant, waiter=place)
            return self._store().leave_line(params)
        except Exception as exc:
            log.error(
                "a job given back to its broker did not leave the line of tenant %r in %r (%s): "
                "it may run twice",
                tenant,
                queue,
                describe(exc),
            )
            return True

    def close(self) -> None:
        """Stop renewing (at worker shutdown); slots still held free at their leases."""
        self._keeper.stop()

    def _renew(self, held: dict[str, str]) -> Sequence[str] | None:
        try:
            params = RenewSlotsParams(tokens=list(held), now=self.clock())
            return self._store().renew_slots(params).lost
        except Exception as exc:
            log.error("renewing tenant slots failed: %s; retrying", describe(exc))
            return None

    def _lapsed(self, tokens: list[str]) -> None:
        log.warning(
            "%d tenant slot(s) lapsed while their jobs ran (the store was unreachable "
            "longer than the lease); the cap may be exceeded until they end",
            len(tokens),
        )


def turn(result: SlotResult, woken: bool) -> str:
    """What a guard does with a job after its acquire: ``run`` (it holds a slot), ``drop``
    (another copy ran; or a woken copy refused: back in line, its timed copy still on its
    way) or ``defer`` (send a timed copy carrying ``result.waiter``)."""
    if result.token is not None:
        return "run"
    if result.gone or woken:
        return "drop"
    return "defer"


def fallback(result: SlotResult, deferrals: int, now: float, first: float, most: float) -> float:
    """Seconds until the timed copy of a job refused a slot is due. A parked job is woken by
    the release of a slot, so its timed copy only covers a release that never comes (the
    holder died: its slot frees at its lease end, ``free_at``; or the waker died before it
    sent the job); an unparked one backs off ``first`` doubling to ``most`` (``deferrals``
    so far), never past ``free_at``."""
    free_in = None if result.free_at is None else max(result.free_at - now, first)
    if result.waiter is not None and free_in is not None:
        return free_in
    backoff = min(most, first * 2.0 ** min(deferrals, 16))
    return backoff if free_in is None else min(backoff, free_in)
