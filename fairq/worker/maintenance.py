"""Store upkeep that must happen even when nobody dequeues: expire leases, promote, prune.

Dequeue maintains the queues it asks for, but a queue no running worker serves would keep the
jobs of a killed worker under their lapsed leases forever. So every worker also maintains every
queue every few seconds, and prunes succeeded jobs older than ``retention``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from fairq.contract import Backend, MaintainParams
from fairq.worker.expiries import Expiries
from fairq.worker.joblog import describe, trace_of

log = logging.getLogger("fairq.worker")


class Maintenance:
    """A daemon thread calling ``backend.maintain`` for every queue every ``interval`` seconds."""

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Callable[[], float],
        interval: float,
        retention: float | None,
        expiries: Expiries,
    ) -> None:
        self.backend = backend
        self.expiries = expiries
        self.clock = clock
        self.interval = interval
        self.retention = retention
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fairq-maintain", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _serve(self) -> None:
        while True:
            self.run_once()
            if self._stopped.wait(self.interval):
                return

    def run_once(self) -> None:
        params = MaintainParams(now=self.clock(), queues=None, retention=self.retention)
        try:
            result = self.backend.maintain(params)
        except Exception as exc:
            log.error("maintenance failed: %s; retrying", describe(exc), exc_info=trace_of(exc))
            return
        self.expiries.report(result.expired)
        if result.promoted or result.pruned:
            log.debug(
                "maintenance: %d promoted, %d pruned",
                result.promoted,
                result.pruned,
                extra={"action": "maintain", "promoted": result.promoted},
            )
