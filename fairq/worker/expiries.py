"""Leases the store expired while this worker called it: one WARNING each, and a count.

Every dequeue, ack_and_dequeue and maintain first expires the leases whose deadline passed:
the runs of workers that were killed, hung, or lost the store for longer than a lease. The
store reports each one; the worker logs it (it is a failed attempt that nobody else will
mention) and counts them for the line it logs when it stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from fairq.contract import ExpiredLease
from fairq.worker.joblog import Outcome, show_tenant

log = logging.getLogger("fairq.worker")


class Expiries:
    """Logs and counts the expired leases the store reports to this worker's calls."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.count = 0  # leases expired, over the worker's life
        self.dead = 0  # of which the job's last attempt: it is dead now

    def report(self, expired: Sequence[ExpiredLease]) -> None:
        if not expired:
            return
        with self._lock:
            self.count += len(expired)
            self.dead += sum(lease.dead for lease in expired)
        now = self.clock()
        for lease in expired:
            _log(lease, now)


def _log(lease: ExpiredLease, now: float) -> None:
    outcome = Outcome.DEAD if lease.dead else Outcome.RETRYING
    then = "that was its last attempt: it is dead now" if lease.dead else "it will run again"
    tenant = show_tenant(lease.tenant)
    log.warning(
        "job %s %s tenant=%s queue=%s attempt=%d outcome=%s: its lease expired %.1f s ago "
        "(the worker running it died, hung, or lost the store for longer than the lease); %s",
        lease.job_id,
        lease.name,
        tenant,
        lease.queue,
        lease.attempt,
        outcome,
        max(now - lease.deadline, 0.0),
        then,
        extra={
            "action": "lease_expired",
            "job_id": lease.job_id,
            "job_name": lease.name,
            "tenant": tenant,
            "queue": lease.queue,
            "attempt": lease.attempt,
            "outcome": str(outcome),
            "deadline": lease.deadline,
        },
    )
