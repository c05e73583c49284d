"""What a relay holds: the jobs it took that no peer's worker has claimed yet.

The relay's dequeue hands jobs out *unclaimed* (``DequeueParams.hold``): each is leased for a
short hold, not its own lease, until a worker's claim starts its run. ``Holds`` keeps them
until then, from a thread of their own so that nothing the relay waits on (a slow publish, a
back-off, the store's wait) can let a hold lapse while the relay lives:

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
import threading
import time
from collections.abc import Callable, Sequence

from fairq.contract import Backend, HeartbeatParams, HeartbeatResult
from fairq.job import Lease
from fairq.worker.joblog import describe, job_fields

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
        self._held: dict[str, tuple[Lease, float]] = {}  # token -> (lease, monotonic taken)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fairq-relay-holds", daemon=True)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def add(self, leases: Sequence[Lease]) -> None:
        """Jobs the relay just took (before it publishes them)."""
        taken = time.monotonic()
        with self._lock:
            for lease in leases:
                self._held[lease.token] = (lease, taken)

    def drop(self, lease: Lease) -> None:
        """A job that left the relay's hands otherwise (handed back, buried)."""
        with self._lock:
            self._held.pop(lease.token, None)

    def renew(self) -> None:
        """Renew every hold; give back the jobs that waited their whole lease unclaimed."""
        now = time.monotonic()
        with self._lock:
            overdue = [
                lease for lease, taken in self._held.values() if now - taken >= lease.lease_timeout
            ]
            for lease in overdue:
                del self._held[lease.token]
            tokens = list(self._held)
        if overdue:
            self._give_back_overdue(overdue)
        if tokens:
            result = self._heartbeat(tokens, self.hold, "renewing the holds of")
            if result is not None:
                with self._lock:
                    for token in (*result.claimed, *result.lost):
                        self._held.pop(token, None)

    def give_back(self) -> None:
        """The relay stops: every job no worker claimed is ready again at once."""
        with self._lock:
            tokens = list(self._held)
            self._held.clear()
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

    def _serve(self) -> None:
        while not self._stopped.wait(self.hold / 3):
            self.renew()

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
