"""What a relay holds: the jobs it took that no peer's worker has claimed yet.

The relay's dequeue hands jobs out *unclaimed* (``DequeueParams.hold``): each is leased for a
short hold, not its own lease, until a worker's claim starts its run. ``Holds`` keeps them
until then, from a thread of their own (``fairq.worker.keeper``) so that nothing the relay waits
on (a slow publish, a back-off, the store's wait) can let a hold lapse while the relay lives:

* every third of the hold, one heartbeat with ``hold`` renews all of them and reports those
  a worker claimed meanwhile (or that are gone: acked, expired), which are forgotten;
* a job that waited its whole lease unclaimed is given back: its message was lost (a broker
  that dropped it, a worker that took it and died before starting it), so the job is
  released again instead of staying out for as long as the relay lives;
* ``give_back`` (the relay stops) shortens what is left to a millisecond: those jobs are ready
  again at the next dequeue of any relay or worker. A relay that dies leaves holds that lapse
  within the hold.

A job given back whose old message a worker takes later is not run from it: its claim finds
the lease gone and the message is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from fairq.contract import Backend, HeartbeatParams, HeartbeatResult
from fairq.job import Lease
from fairq.worker.joblog import describe, job_fields
from fairq.worker.keeper import LeaseKeeper

log = logging.getLogger("fairq.relay")

#: The hold a job given back is left: it is ready again at the next maintenance.
GIVE_BACK = 0.001


class Holds:
    """The unclaimed jobs of one relay, kept by a thread while the relay runs."""

    def __init__(
        self, backend: Backend, hold: float, *, clock: Callable[[], float], name: str
    ) -> None:
        self.backend = backend
        self.hold = hold
        self.clock = clock
        self.name = name
        # token -> (lease, monotonic taken), each renewed every third of the hold
        self._keeper: LeaseKeeper[tuple[Lease, float]] = LeaseKeeper(
            self._renew, name="fairq-relay-holds"
        )

    def __len__(self) -> int:
        return len(self._keeper)

    def stop(self) -> None:
        self._keeper.stop()

    def add(self, leases: Sequence[Lease]) -> None:
        """Jobs the relay just took (before it publishes them)."""
        taken = time.monotonic()
        for lease in leases:
            self._keeper.hold(lease.token, (lease, taken), self.hold)

    def drop(self, lease: Lease) -> None:
        """A job that left the relay's hands otherwise (handed back, buried)."""
        self._keeper.drop(lease.token)

    def give_back(self) -> None:
        """The relay stops: every job no worker claimed is ready again at once."""
        tokens = list(self._keeper.take_all())
        if not tokens:
            return
        result = self._heartbeat(tokens, GIVE_BACK, "giving back")
        if result is not None:
            log.info(
                "relay %s: gave back %d released jobs no worker had claimed",
                self.name,
                len(result.deadlines),
            )

    # -- inside ----------------------------------------------------------------------------

    def _renew(self, held: dict[str, tuple[Lease, float]]) -> list[str] | None:
        """Renew every hold; give back the jobs that waited their whole lease unclaimed. The
        jobs a worker claimed, or gone (acked, expired), are forgotten."""
        now = time.monotonic()
        overdue = [lease for lease, taken in held.values() if now - taken >= lease.lease_timeout]
        for lease in overdue:
            self._keeper.drop(lease.token)
        if overdue:
            self._give_back_overdue(overdue)
        given_back = {lease.token for lease in overdue}
        tokens = [token for token in held if token not in given_back]
        if not tokens:
            return None
        result = self._heartbeat(tokens, self.hold, "renewing the holds of")
        return None if result is None else [*result.claimed, *result.lost]

    def _give_back_overdue(self, leases: list[Lease]) -> None:
        result = self._heartbeat([lease.token for lease in leases], GIVE_BACK, "giving back")
        if result is None:
            return
        for lease in leases:
            if lease.token in result.deadlines:
                log.warning(
                    "job %s %s of tenant %r: no worker claimed it within its lease (%g s) of "
                    "its release (the broker lost its message, or a worker took it and died "
                    "before starting it); given back, it is released again",
                    lease.job_id,
                    lease.name,
                    lease.tenant,
                    lease.lease_timeout,
                    extra=job_fields(lease, "unclaimed_given_back"),
                )

    def _heartbeat(self, tokens: list[str], hold: float, doing: str) -> HeartbeatResult | None:
        try:
            return self.backend.heartbeat(
                HeartbeatParams(tokens=tokens, now=self.clock(), hold=hold)
            )
        except Exception as exc:  # the store is down: the holds lapse, nothing is lost
            log.error(
                "relay %s: %s %d released jobs failed: %s; should the store stay out of "
                "reach, their holds lapse within %g s and they are released again",
                self.name,
                doing,
                len(tokens),
                describe(exc),
                self.hold,
            )
            return None
