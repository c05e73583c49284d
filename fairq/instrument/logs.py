"""The job log, a plug-in of the seam every App has: one line per job end, and the warnings
about leases lost or expired, with the same fields in ``extra`` for handlers.

A success is logged at DEBUG (one line per job is most of a no-op job's cost at INFO); every
other outcome at WARNING or ERROR. ``--log-level debug`` (or the ``fairq.worker`` logger at
DEBUG) shows the successes too, and a line for each job a worker takes ("started"), with the
same structured fields. Turn the lines off or route them with the logging configuration of
``fairq.worker``.

Every record about a job carries ``action`` (what happened) and the job's id, name, tenant,
queue and attempt as attributes, so a JSON or OpenTelemetry handler needs no parsing. Tenants
are shown as ``repr`` cut to 100 characters: they are arbitrary user strings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from fairq.contract import ExpiredLease
from fairq.errors import FairqError
from fairq.instrument import JobEnd, Middleware, Outcome
from fairq.job import Lease

log = logging.getLogger("fairq.worker")

TENANT_CHARS = 100

LEVELS = {
    Outcome.SUCCEEDED: logging.DEBUG,
    Outcome.RETRYING: logging.WARNING,
    Outcome.DEAD: logging.ERROR,
    Outcome.LEASE_LOST: logging.WARNING,
    Outcome.HANDED_BACK: logging.WARNING,
    Outcome.SLICE_ENDED: logging.INFO,
    Outcome.ERROR: logging.ERROR,
    Outcome.CANCELLED: logging.INFO,
}
#: The outcomes whose line carries the exception's traceback (a retry's is logged at DEBUG).
WITH_TRACEBACK = {Outcome.DEAD, Outcome.ERROR}
#: The outcomes whose ``JobEnd.error`` is no error but why the run ended as planned: logged as
#: ``note=`` (the record's ``note``), its ``error`` left None.
NOT_ERRORS = {Outcome.SLICE_ENDED}


def trace_of(exc: BaseException | None) -> BaseException | None:
    """The traceback worth logging with an error: none for fairq's own errors (a store out of
    reach, a result that is not JSON …): their message says what is wrong and where, in one
    line, on every store; anything else (a job's own exception, a bug) keeps its traceback."""
    return None if isinstance(exc, FairqError) else exc


def describe(exc: BaseException) -> str:
    """``TypeName: message``, the way a log line, a span's status and a dead job's
    ``last_error`` start."""
    message = str(exc)
    return f"{type(exc).__qualname__}: {message}" if message else type(exc).__qualname__


def show_tenant(tenant: str) -> str:
    shown = repr(tenant)
    return shown if len(shown) <= TENANT_CHARS else shown[: TENANT_CHARS - 1] + "…"


def job_fields(lease: Lease, action: str) -> dict[str, Any]:
    """The structured fields of a record about one job (passed as ``extra``)."""
    return {
        "action": action,
        "job_id": lease.job_id,
        "job_name": lease.name,
        "tenant": show_tenant(lease.tenant),
        "queue": lease.queue,
        "attempt": lease.attempt,
        "max_attempts": lease.max_attempts,
    }


class JobLog(Middleware):
    """Logs each job's start (DEBUG) and end, lost leases, and leases the store expired.
    ``clock``: the App's, to say how long ago an expired lease's deadline passed."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        """The "started" lines, once per batch taken (a check per job would cost every job)."""
        if log.isEnabledFor(logging.DEBUG):
            for lease in leases:
                fields = job_fields(lease, "start")
                log.debug("job %s %s started", lease.job_id, lease.name, extra=fields)

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        if end.outcome is Outcome.HANDED_BACK and end.error is not None:
            self._handed_back_with_reason(lease, end.error)
            return
        level = LEVELS[end.outcome]
        if log.isEnabledFor(level):  # nothing is built for a line nobody reads
            self._end_line(lease, end, level)
        if end.outcome is Outcome.RETRYING and end.exc is not None:
            log.debug("traceback of job %s", lease.job_id, exc_info=end.exc)

    def _end_line(self, lease: Lease, end: JobEnd, level: int) -> None:
        fields = job_fields(lease, "job_end")
        fields["outcome"] = str(end.outcome)
        fields["duration_ms"] = round(end.seconds * 1000, 1)
        label = "note" if end.outcome in NOT_ERRORS else "error"
        fields["error"] = None if label == "note" else end.error
        if label == "note":
            fields["note"] = end.error
        log.log(
            level,
            "job %s %s tenant=%s queue=%s attempt=%d/%d outcome=%s duration_ms=%.1f%s",
            lease.job_id,
            lease.name,
            fields["tenant"],
            lease.queue,
            lease.attempt,
            lease.max_attempts,
            end.outcome,
            fields["duration_ms"],
            f" {label}={end.error}" if end.error else "",
            extra=fields,
            exc_info=trace_of(end.exc) if end.outcome in WITH_TRACEBACK else None,
        )

    def _handed_back_with_reason(self, lease: Lease, why: str) -> None:
        """A job released for a reason (this worker does not know it): the reason is the line."""
        fields = job_fields(lease, "unknown_job")
        fields["outcome"] = str(Outcome.HANDED_BACK)
        log.warning("job %s %s: %s", lease.job_id, lease.name, why, extra=fields)

    def lease_lost(self, lease: Lease, why: str) -> None:
        log.warning(
            "job %s %s lost its lease: %s",
            lease.job_id,
            lease.name,
            why,
            extra=job_fields(lease, "lease_lost"),
        )

    def lease_expired(self, expired: ExpiredLease) -> None:
        outcome = Outcome.DEAD if expired.dead else Outcome.RETRYING
        then = "that was its last attempt: it is dead now" if expired.dead else "it will run again"
        why = "the worker running it died, hung, or lost the store for longer than the lease"
        level = logging.WARNING
        if not expired.claimed:  # never ran: a relay's hold lapsed, no attempt is spent
            why = (
                "a relay held it and no worker claimed it: the relay died, stopped or gave it back"
            )
            outcome, then = Outcome.HANDED_BACK, "it is ready again (the attempt not counted)"
            level = logging.INFO
        if expired.cancelled:
            outcome, then = Outcome.CANCELLED, "it had a cancel request: it is cancelled now"
        tenant = show_tenant(expired.tenant)
        log.log(
            level,
            "job %s %s tenant=%s queue=%s attempt=%d outcome=%s: its lease expired %.1f s ago "
            "(%s); %s",
            expired.job_id,
            expired.name,
            tenant,
            expired.queue,
            expired.attempt,
            outcome,
            max(self.clock() - expired.deadline, 0.0),
            why,
            then,
            extra={
                "action": "lease_expired",
                "job_id": expired.job_id,
                "job_name": expired.name,
                "tenant": tenant,
                "queue": expired.queue,
                "attempt": expired.attempt,
                "outcome": str(outcome),
                "deadline": expired.deadline,
            },
        )
