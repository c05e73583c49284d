"""Leases the store expired while this worker called it: one WARNING each, and a count.

Every dequeue, ack_and_dequeue and maintain first expires the leases whose deadline passed:
the runs of workers that were killed, hung, or lost the store for longer than a lease. The
store reports each one; the worker hands it to the ``lease_expired`` hooks (the job log warns:
it is a failed attempt that nobody else will mention) and counts them for the line it logs
when it stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from fairq.contract import ExpiredLease
from fairq.instrument.hooks import Hooks, default_hooks


class Expiries:
    """Reports and counts the expired leases the store reports to this worker's calls."""

    def __init__(self, clock: Callable[[], float], hooks: Hooks | None = None) -> None:
        self.clock = clock
        self.hooks = hooks or default_hooks(clock)
        self._lock = threading.Lock()
        self.count = 0  # leases expired, over the worker's life
        self.dead = 0  # of which the job's last attempt: it is dead now

    def report(self, expired: Sequence[ExpiredLease]) -> None:
        if not expired:
            return
        with self._lock:
            self.count += len(expired)
            self.dead += sum(lease.dead for lease in expired)
        for lease in expired:
            self.hooks.lease_expired(lease)
