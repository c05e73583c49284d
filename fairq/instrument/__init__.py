"""The instrumentation seam: hooks around a job's life, and the time of every store call.

Logging, metrics and tracing plug in here; stores and the worker neither log a job's end nor
count on their own (docs/observability.md). A plug-in is a ``Middleware`` whose hooks it
overrides; the others cost nothing (the dispatcher, ``fairq.instrument.hooks``, calls only what
is overridden). Register plug-ins on the App: ``App(url, middleware=[PrometheusMetrics()])`` or
``app.add_middleware(...)``, before a worker starts.

Who calls what, and on which thread:

=====================  =====================================================================
``before_enqueue``     ``App.enqueue*``, the caller's thread, before the store call; may
                       return the jobs to store instead (e.g. with trace headers added)
``after_enqueue``      the same thread, after it: the jobs stored and the queues chosen, or
                       the error raised
``after_dequeue``      the worker's fetch (or a job) thread: the leases just handed out; a
                       relayed job's peer process when it claims the job's lease
``before_run``         the job's own thread (``def``) or task (``async def``), right before
                       the function
``after_run``          the same thread or task, right after it (before its end is stored)
``after_job``          every attempt's end, once stored or given up: ``JobEnd.outcome``
``after_retry`` …      then, for those outcomes only: ``after_retry``, ``after_dead``,
                       ``after_lease_lost``, ``after_hand_back``, ``after_cancelled``
``after_checkpoint``   an iterative job's thread (for an ``async def`` one, a thread of its
                       event loop's default executor): its progress was just stored
``lease_lost``         the heartbeat found a running job's lease gone
``lease_expired``      the store expired a lease (its worker died, hung, or lost the store)
``store_call``         every store call of the worker and ``App.enqueue*`` (``StoreCall``)
=====================  =====================================================================

A hook that raises is logged once per hook (logger ``fairq.instrument``) and never breaks the
job, the enqueue or the worker. Hooks run inline on hot paths: keep them short and
non-blocking (count, record; never call the network from one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from fairq.contract import ExpiredLease
from fairq.job import Lease, NewJob, Progress

__all__ = ["JobEnd", "Middleware", "Outcome", "StoreCall"]


class Outcome(str, Enum):
    """How one attempt of a job ended (``JobEnd.outcome``; logged as ``outcome``)."""

    SUCCEEDED = "succeeded"  # acked
    RETRYING = "retrying"  # failed; scheduled to run again after a back-off
    DEAD = "dead"  # failed for good (attempts exhausted, or retrying cannot help)
    LEASE_LOST = "lease_lost"  # the job ended, but its lease had already gone back
    HANDED_BACK = "handed_back"  # released unfinished; the attempt does not count
    SLICE_ENDED = "slice_ended"  # an iterative job used up its time slice: handed back, to
    # resume from its checkpoint once its tenant's turn comes again (fairq.app.iteration)
    ERROR = "error"  # the store could not record the outcome; the lease will expire
    CANCELLED = "cancelled"  # stopped on a cancel request (fairq.cancel); never runs again

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class JobEnd:
    """The end of one attempt. ``seconds``: how long the job ran (0 when it never ran: a job
    this worker does not know, or arguments that cannot be decoded). ``error``: what went
    wrong, as stored and logged (for a hand-back: why, or None at a shutdown). ``exc``: the
    exception behind it, the job's or the store's, when there is one. Read-only for hooks
    (not frozen: one is made per job, and a frozen dataclass costs three times as much)."""

    outcome: Outcome
    seconds: float
    error: str | None = None
    exc: BaseException | None = None


@dataclass(slots=True)
class StoreCall:
    """One call to the store: the operation (``Backend`` method name; ``dequeue_wait`` for a
    dequeue that first waits for new work), its wall-clock seconds, and what it raised.
    Read-only for hooks."""

    op: str
    seconds: float
    error: BaseException | None = None


class Middleware:
    """A plug-in of the seam: subclass it and override the hooks you need (all no-ops here).

    Hooks are called from several threads at once: guard shared state with a lock.
    """

    def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob] | None:
        """Before ``jobs`` are stored. Return replacements (the same jobs, in the same order,
        e.g. ``dataclasses.replace(job, headers=…)``) or None to keep them."""
        return None

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        """After the store call: the jobs stored and the ``queues`` each went to (its own or a
        throttle rule's), or None and the ``error`` it raised (then ``jobs`` are all those
        given, and none was stored). A job whose unique key was held is not stored, and not
        among ``jobs``: they may be none of the jobs given."""

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        """Jobs handed to this process (never called with none)."""

    def before_run(self, lease: Lease) -> None:
        """On the job's thread or task, right before its function runs."""

    def after_run(self, lease: Lease, error: BaseException | None, seconds: float) -> None:
        """On the same thread or task, right after the function returned or raised."""

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        """An attempt ended and its outcome was stored (or could not be: ``Outcome.ERROR``)."""

    def after_retry(self, lease: Lease, end: JobEnd) -> None:
        """After ``after_job``, for a failed attempt that will run again."""

    def after_dead(self, lease: Lease, end: JobEnd) -> None:
        """After ``after_job``, for a job that failed for good (now a dead job)."""

    def after_lease_lost(self, lease: Lease, end: JobEnd) -> None:
        """After ``after_job``, for a job whose outcome came too late: its lease was gone."""

    def after_hand_back(self, lease: Lease, end: JobEnd) -> None:
        """After ``after_job``, for a job released unfinished (its attempt not counted)."""

    def after_cancelled(self, lease: Lease, end: JobEnd) -> None:
        """After ``after_job``, for a running job that stopped on a cancel request (it ends
        ``cancelled``; ``end.error`` says how it stopped)."""

    def after_checkpoint(self, lease: Lease, progress: Progress) -> None:
        """An iterative job's progress was stored (``Backend.checkpoint``)."""

    def lease_lost(self, lease: Lease, why: str) -> None:
        """The heartbeat found the lease of a job still running gone; ``why`` says what
        became of the job. Its outcome will be refused (``after_lease_lost``)."""

    def lease_expired(self, expired: ExpiredLease) -> None:
        """The store expired a lease whose worker never reported (killed, hung, cut off):
        a failed attempt, retried or (``expired.dead``) dead. Reported to the process whose
        store call expired it, which is not the one that held it."""

    def store_call(self, call: StoreCall) -> None:
        """A store call ended (or raised). Only overriding this makes calls timed at all."""
