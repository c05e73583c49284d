"""The tenant slots one peer worker process holds, and the one thread that renews them.

Celery's ``SlotTask``, RQ's ``@fair.guard(slots=…)`` and Dramatiq's ``routed_actor(slots=True)``
all run a job only while its tenant holds a slot in the store (``Backend.acquire_slot``): a
lease, so a killed worker's slot frees when it runs out. This keeper takes the slot, renews
every slot this process holds (every third of the shortest lease) while its jobs run, and gives
it back when the job ends. It is fork-safe: ``store`` returns the calling process's own store
connection, and a forked child (a prefork pool's, an RQ work horse) starts its own thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from fairq.contract import (
    AcquireSlotParams,
    Backend,
    ReleaseSlotsParams,
    RenewSlotsParams,
    SlotResult,
)
from fairq.worker.joblog import describe

log = logging.getLogger("fairq.integrations")


class SlotKeeper:
    """Takes, renews and gives back tenant slots for the jobs of this process."""

    def __init__(
        self, store: Callable[[], Backend], clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self.clock = clock
        self._held: dict[str, float] = {}  # token -> its lease (seconds)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._thread_pid: int | None = None  # the process whose thread renews _held
        self._closed = False

    def acquire(
        self, queue: str, tenant: str, holder: str, lease: float, limit: int | None = None
    ) -> SlotResult:
        """A slot of ``tenant`` in ``queue``, held (and renewed) until ``release``; or the
        refusal (``token`` None, ``free_at``: when the earliest held slot's lease ends)."""
        result = self._store().acquire_slot(
            AcquireSlotParams(
                queue=queue,
                tenant=tenant,
                holder=holder,
                lease=lease,
                now=self.clock(),
                limit=limit,
            )
        )
        if result.token is not None:
            with self._lock:
                self._held[result.token] = lease
                if self._thread_pid != os.getpid() and not self._closed:  # none in this process
                    self._thread_pid = os.getpid()
                    threading.Thread(
                        target=self._renew_forever, name="fairq-slots", daemon=True
                    ).start()
                self._changed.notify_all()
        return result

    def release(self, token: str | None) -> None:
        """Give a slot back (a failure is logged: the slot then frees when its lease ends)."""
        if token is None:
            return
        with self._lock:
            self._held.pop(token, None)
        try:
            self._store().release_slots(ReleaseSlotsParams(tokens=[token], now=self.clock()))
        except Exception as exc:
            log.error("a tenant slot was not given back (%s); it frees at its lease", describe(exc))

    def close(self) -> None:
        """Stop renewing (at worker shutdown); slots still held free at their leases."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    def _renew_forever(self) -> None:
        last = time.monotonic()
        while True:
            with self._lock:
                while not self._closed and not self._held:
                    self._changed.wait()
                if self._closed:
                    return
                left = last + min(self._held.values()) / 3 - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                tokens = list(self._held)
            last = time.monotonic()
            try:
                result = self._store().renew_slots(
                    RenewSlotsParams(tokens=tokens, now=self.clock())
                )
            except Exception as exc:
                log.error("renewing tenant slots failed: %s; retrying", describe(exc))
                continue
            with self._lock:  # a slot given back since the snapshot has not lapsed
                lapsed = [t for t in result.lost if self._held.pop(t, None) is not None]
            if lapsed:
                log.warning(
                    "%d tenant slot(s) lapsed while their jobs ran (the store was unreachable "
                    "longer than the lease); the cap may be exceeded until they end",
                    len(lapsed),
                )
