"""Keeps the worker's leases alive while their jobs run, and says when one was lost anyway.

Every ``interval`` seconds (by default a third of the shortest lease among the running jobs, so
two beats can be missed before a lease lapses) one ``heartbeat`` call extends every held lease.
A lost lease is logged with what became of its job (``lost.why_lost``: gone from the store,
held by another attempt, finished, or back in its queue), and whether the beats before could
not reach the store; storing its outcome later will be refused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from fairq.contract import Backend, HeartbeatParams
from fairq.instrument.hooks import Hooks, default_hooks
from fairq.job import Lease
from fairq.worker.cancels import ask_to_stop
from fairq.worker.joblog import describe, trace_of
from fairq.worker.lost import why_lost
from fairq.worker.running import RunningJobs

log = logging.getLogger("fairq.worker")


class Heartbeat:
    """A daemon thread extending the leases in ``running`` until ``stop``."""

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
        self._stopped = threading.Event()
        self._reported: set[str] = set()
        self._failed = False  # the last beat could not reach the store
        self._thread = threading.Thread(target=self._serve, name="fairq-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self.running.changed.set()
        self._thread.join()

    def _serve(self) -> None:
        last_beat = float("-inf")
        while True:
            self.running.changed.clear()
            # Checked after the clear: a stop() between the two would otherwise be lost, and
            # the wait below would never end (stop() sets the flag, then ``changed``).
            if self._stopped.is_set():
                return
            leases = self.running.watch()
            if not leases:
                self.running.changed.wait()
                continue
            wait = last_beat + self._interval_for(leases) - time.monotonic()
            if wait > 0:
                self.running.changed.wait(wait)
                continue
            last_beat = time.monotonic()
            self._beat(leases)

    def _interval_for(self, leases: list[Lease]) -> float:
        if self.interval is not None:
            return self.interval
        return min(lease.lease_timeout for lease in leases) / 3

    def _beat(self, leases: list[Lease]) -> None:
        try:
            result = self.backend.heartbeat(
                HeartbeatParams(tokens=[lease.token for lease in leases], now=self.clock())
            )
        except Exception as exc:
            log.error("heartbeat failed: %s; retrying", describe(exc), exc_info=trace_of(exc))
            self._failed = True
            return
        unreachable = self._failed
        self._failed = False
        self.running.extended(result.deadlines)
        if result.cancelled:
            ask_to_stop(self.running, result.cancelled)
        # A job that ended meanwhile is not reported here: its ack or failure may have been
        # stored between our look at the leases and this beat, and if its lease was lost
        # indeed, whoever stores its outcome says so.
        lost = self.running.unclaimed(set(result.lost)) - self._reported
        if lost:
            self._report([lease for lease in leases if lease.token in lost], unreachable)
        self._reported |= lost

    def _report(self, leases: list[Lease], unreachable: bool) -> None:
        held = [(lease, self.running.deadline(lease)) for lease in leases]
        why = why_lost(self.backend, held, self.clock())
        before = (
            " (the heartbeats before this one could not reach the store)" if unreachable else ""
        )
        for lease in leases:
            self.hooks.lease_lost(lease, why[lease.token] + before)
