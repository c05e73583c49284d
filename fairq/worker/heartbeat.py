"""Keeps the worker's leases alive while their jobs run, and says when one was lost anyway.

Every ``interval`` seconds (by default a third of the shortest lease among the running jobs, so
two beats can be missed before a lease lapses) one ``heartbeat`` call extends every held lease.
A lost lease is logged with what became of its job (``lost.why_lost``: gone from the store,
held by another attempt, finished, or back in its queue), and whether the beats before could
not reach the store; storing its outcome later will be refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from fairq.contract import Backend, HeartbeatParams
from fairq.instrument.hooks import Hooks, default_hooks
from fairq.job import Lease
from fairq.worker.cancels import ask_to_stop
from fairq.worker.joblog import describe, trace_of
from fairq.worker.keeper import LeaseKeeper
from fairq.worker.lost import why_lost
from fairq.worker.running import RunningJobs

log = logging.getLogger("fairq.worker")


class Heartbeat:
    """Extends the leases in ``running`` (from a ``LeaseKeeper``'s thread) until ``stop``."""

    def __init__(
        self,
        backend: Backend,
        running: RunningJobs,
        *,
        clock: Callable[[], float],
        interval: float | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.backend = backend
        self.running = running
        self.clock = clock
        self.hooks = hooks or default_hooks(clock)
        self.interval = interval
        self._failed = False  # the last beat could not reach the store
        self._keeper: LeaseKeeper[Lease] = LeaseKeeper(
            self._beat, name="fairq-heartbeat", every=interval
        )

    def start(self) -> None:
        self.running.kept_by(self._keeper)

    def stop(self) -> None:
        self._keeper.stop()

    def _beat(self, held: dict[str, Lease]) -> Sequence[str] | None:
        """One beat; the leases lost, which are beaten no more (and so reported once)."""
        try:
            result = self.backend.heartbeat(HeartbeatParams(tokens=list(held), now=self.clock()))
        except Exception as exc:
            log.error("heartbeat failed: %s; retrying", describe(exc), exc_info=trace_of(exc))
            self._failed = True
            return None
        unreachable = self._failed
        self._failed = False
        self.running.extended(result.deadlines)
        if result.cancelled:
            ask_to_stop(self.running, result.cancelled)
        # A job that ended meanwhile is not reported here: its ack or failure may have been
        # stored between our look at the leases and this beat, and if its lease was lost
        # indeed, whoever stores its outcome says so.
        lost = self.running.unclaimed(set(result.lost))
        if lost:
            self._report([lease for token, lease in held.items() if token in lost], unreachable)
        return result.lost

    def _report(self, leases: list[Lease], unreachable: bool) -> None:
        held = [(lease, self.running.deadline(lease)) for lease in leases]
        why = why_lost(self.backend, held, self.clock())
        before = (
            " (the heartbeats before this one could not reach the store)" if unreachable else ""
        )
        for lease in leases:
            self.hooks.lease_lost(lease, why[lease.token] + before)
