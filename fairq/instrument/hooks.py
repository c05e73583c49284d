"""Calls the plug-ins' hooks: only those they override, and never lets one break a job.

Built once per App (``App.hooks``; again when a plug-in is added): for each hook, the bound
methods of the plug-ins that override it, in the order registered. A hook nobody overrides is an
empty tuple, so the worker pays a loop over nothing for it. A hook that raises is logged with
its traceback the first time (per plug-in and hook), counted always, and the caller goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from fairq.contract import ExpiredLease
from fairq.errors import ConfigError
from fairq.instrument import JobEnd, Middleware, Outcome, StoreCall
from fairq.instrument.logs import JobLog
from fairq.job import Lease, NewJob, Progress

log = logging.getLogger("fairq.instrument")

#: Every hook a plug-in may override: Middleware's public methods (one list, never a copy).
HOOK_NAMES = tuple(name for name in vars(Middleware) if not name.startswith("_"))

Bound = tuple[tuple[str, Callable[..., Any]], ...]  # (label for the log, bound method)


class Hooks:
    """The hooks of ``middleware``, called in order; each one guarded."""

    def __init__(self, middleware: Sequence[object]) -> None:
        for plugin in middleware:
            check_middleware(plugin)
        self.middleware = tuple(middleware)
        self.failures: Counter[str] = Counter()  # failures per "Plugin.hook"
        self._lock = threading.Lock()
        self._before_enqueue = self._overriding("before_enqueue")
        self._after_enqueue = self._overriding("after_enqueue")
        self._after_dequeue = self._overriding("after_dequeue")
        self._before_run = self._overriding("before_run")
        self._after_run = self._overriding("after_run")
        self._after_job = self._overriding("after_job")
        self._by_outcome: dict[Outcome, Bound] = {
            Outcome.RETRYING: self._overriding("after_retry"),
            Outcome.DEAD: self._overriding("after_dead"),
            Outcome.LEASE_LOST: self._overriding("after_lease_lost"),
            Outcome.HANDED_BACK: self._overriding("after_hand_back"),
            Outcome.CANCELLED: self._overriding("after_cancelled"),
        }
        self._any_by_outcome = any(self._by_outcome.values())
        self._after_checkpoint = self._overriding("after_checkpoint")
        self._lease_lost = self._overriding("lease_lost")
        self._lease_expired = self._overriding("lease_expired")
        self._store_call = self._overriding("store_call")
        #: Some plug-in times store calls: the worker then uses a ``TimedBackend``.
        self.times_store_calls = bool(self._store_call)
        #: Some plug-in has ``before_run`` or ``after_run``: the worker calls neither otherwise
        #: (two calls per job saved where only the job log listens).
        self.wants_run = bool(self._before_run or self._after_run)

    def _overriding(self, name: str) -> Bound:
        base = getattr(Middleware, name)
        found = []
        for plugin in self.middleware:
            method = getattr(type(plugin), name, None)
            if method is None or method is base:
                continue
            found.append((f"{type(plugin).__qualname__}.{name}", getattr(plugin, name)))
        return tuple(found)

    def _call(self, bound: Bound, *args: Any) -> None:
        """Each hook of ``bound`` with ``args``; one that raises is reported, not raised."""
        for label, hook in bound:
            try:
                hook(*args)
            except Exception as exc:
                self._failed(label, exc)

    def _failed(self, label: str, exc: BaseException) -> None:
        with self._lock:
            self.failures[label] += 1
            first = self.failures[label] == 1
        if first:
            log.error(
                "middleware hook %s raised %s: %s (ignored; the job goes on; later failures of "
                "this hook are counted, not logged)",
                label,
                type(exc).__qualname__,
                exc,
                exc_info=exc,
                extra={"action": "hook_failed", "hook": label},
            )

    # -- producers ---------------------------------------------------------------------

    def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob]:
        for label, hook in self._before_enqueue:
            try:
                replaced = hook(jobs)
                if replaced is not None:
                    jobs = _checked_replacement(jobs, replaced)
            except Exception as exc:
                self._failed(label, exc)
        return jobs

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        self._call(self._after_enqueue, jobs, queues, error)

    # -- workers -----------------------------------------------------------------------

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        if not leases:
            return
        self._call(self._after_dequeue, leases)

    def before_run(self, lease: Lease) -> None:
        self._call(self._before_run, lease)

    def after_run(self, lease: Lease, error: BaseException | None, seconds: float) -> None:
        self._call(self._after_run, lease, error, seconds)

    def job_end(self, lease: Lease, end: JobEnd) -> None:
        """``after_job``, then the hook of its outcome (``after_retry`` …)."""
        self._call(self._after_job, lease, end)
        self._call(self._by_outcome.get(end.outcome, ()), lease, end)

    def job_ends(self, ends: Sequence[tuple[Lease, JobEnd]]) -> None:
        """``job_end`` for a batch (the acks the worker stored together): one call, not one
        per job."""
        if self._after_job:
            for lease, end in ends:
                self._call(self._after_job, lease, end)
        if self._any_by_outcome:
            for lease, end in ends:
                self._call(self._by_outcome.get(end.outcome, ()), lease, end)

    def after_checkpoint(self, lease: Lease, progress: Progress) -> None:
        self._call(self._after_checkpoint, lease, progress)

    def lease_lost(self, lease: Lease, why: str) -> None:
        self._call(self._lease_lost, lease, why)

    def lease_expired(self, expired: ExpiredLease) -> None:
        self._call(self._lease_expired, expired)

    def store_call(self, call: StoreCall) -> None:
        self._call(self._store_call, call)


def check_middleware(plugin: object) -> None:
    """Refuse what cannot be a plug-in, at registration: a class instead of an instance, or an
    object with no hook at all."""
    if isinstance(plugin, type):
        raise ConfigError(
            f"middleware must be an instance, got the class {plugin.__qualname__}: "
            f"pass {plugin.__qualname__}()"
        )
    if not any(callable(getattr(plugin, name, None)) for name in HOOK_NAMES):
        raise ConfigError(
            f"middleware {plugin!r} has none of the hooks of fairq.instrument.Middleware "
            f"({', '.join(HOOK_NAMES)}); subclass Middleware and override the ones you need"
        )


def _checked_replacement(jobs: Sequence[NewJob], replaced: object) -> Sequence[NewJob]:
    """What a ``before_enqueue`` returned, if it is the same jobs (ids, in order)."""
    if (
        not isinstance(replaced, Sequence)
        or len(replaced) != len(jobs)
        or not all(isinstance(job, NewJob) for job in replaced)
        or [job.id for job in replaced] != [job.id for job in jobs]
    ):
        raise TypeError(
            "before_enqueue must return None or the same jobs (a list of NewJob with the same "
            f"ids, in order), got {replaced!r:.200}"
        )
    return list(replaced)


def default_hooks(clock: Callable[[], float] = time.time) -> Hooks:
    """The hooks of an App with no plug-ins of its own: the job log alone (for parts of the
    worker built on their own, as tests do)."""
    return Hooks([JobLog(clock)])
