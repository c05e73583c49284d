"""Dynamic weights: ask the app's ``tenant_weights`` callbacks, store the weights that changed.

The callback is the application's code (plans, recent usage, a database query), so it is
treated as untrusted: it runs at most once per ``every`` seconds per process (the timestamp
lives on the registration, shared by every worker of the process), a bad answer or an exception
changes nothing (the last good weights stay in the store) and is logged as an error naming the
problem. Only weights that differ from the stored ones are written, with ``set_tenant``, so
workers of other processes that arrive at the same answer write nothing.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence

from fairq.app.declare import TenantWeights
from fairq.contract import Backend, StatsParams, TenantSettingsParams
from fairq.worker.joblog import describe, trace_of

log = logging.getLogger("fairq.worker")


class BadWeights(ValueError):
    """The callback's answer cannot be used; the message names what is wrong."""


def refresh(registration: TenantWeights, backend: Backend, now: float) -> bool:
    """Call the callback if its interval has passed and store what changed; True if called."""
    with registration.lock:
        last = registration.last_called
        if last is not None and now - last < registration.every:
            return False
        registration.last_called = now
        queue = registration.queue
        rows = backend.stats(StatsParams(queue=queue, now=now))
        pending = [r.tenant for r in rows if r.ready + r.scheduled + r.running > 0]
        try:
            weights = checked(registration.fn(pending))
        except Exception as exc:
            log.error(
                "tenant_weights for queue %r failed: %s; keeping the last good weights",
                queue,
                describe(exc),
                exc_info=not isinstance(exc, BadWeights),
                extra={"action": "weights_failed", "queue": queue},
            )
            return True
        registration.last_good = weights
        stored = {r.tenant: r.weight for r in rows}
        for tenant, weight in weights.items():
            if stored.get(tenant) != weight:
                backend.set_tenant(
                    TenantSettingsParams(queue=queue, tenant=tenant, now=now, weight=weight)
                )
                log.info(
                    "tenant %r of queue %r: weight %g%s",
                    tenant,
                    queue,
                    weight,
                    " (paused)" if weight == 0 else "",
                    extra={"action": "weight_set", "queue": queue, "tenant": tenant},
                )
        return True


def checked(answer: object) -> dict[str, float]:
    """The callback's answer as ``{tenant: weight}``, or BadWeights naming the first problem."""
    if not isinstance(answer, Mapping):
        raise BadWeights(f"it returned {type(answer).__name__}, not a mapping of tenant to weight")
    weights: dict[str, float] = {}
    for tenant, weight in answer.items():
        if not isinstance(tenant, str) or tenant == "":
            raise BadWeights(f"tenant {tenant!r} is not a non-empty string")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise BadWeights(f"weight {weight!r} of tenant {tenant!r} is not a number")
        if not math.isfinite(weight) or weight < 0:
            raise BadWeights(
                f"weight {weight!r} of tenant {tenant!r} must be 0 (paused) or a positive "
                "finite number"
            )
        weights[tenant] = float(weight)
    return weights


class WeightRefresher:
    """A daemon thread that refreshes each registration whose queue the worker serves."""

    def __init__(
        self,
        backend: Backend,
        registrations: Sequence[TenantWeights],
        *,
        clock: Callable[[], float],
    ) -> None:
        self.backend = backend
        self.registrations = list(registrations)
        self.clock = clock
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fairq-weights", daemon=True)

    def start(self) -> None:
        """Refresh now (so the first dequeue sees the weights), then every so often."""
        if self.registrations:
            self.run_once()
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def run_once(self) -> None:
        for registration in self.registrations:
            try:
                refresh(registration, self.backend, self.clock())
            except Exception as exc:  # the store failed: try again next round
                why = describe(exc)
                log.error("refreshing tenant weights failed: %s", why, exc_info=trace_of(exc))

    def _serve(self) -> None:
        # Look four times per interval: the due check uses the app's clock, so waking a little
        # early (by the thread's clock) must not stretch the interval to two.
        pause = max(min(r.every for r in self.registrations) / 4, 0.01)
        while not self._stopped.wait(pause):
            self.run_once()
