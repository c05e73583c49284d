"""What the worker logs: one line per job end, with the same fields in ``extra`` for handlers.

A success is logged at DEBUG (one line per job is most of a no-op job's cost at INFO); every
other outcome at WARNING or ERROR. ``--log-level debug`` (or the ``fairq.worker`` logger at
DEBUG) shows the successes too, with the same structured fields.

Every record of ``fairq.worker`` about a job carries ``action`` (what happened) and the job's id,
name, tenant, queue and attempt as attributes, so a JSON or OpenTelemetry handler needs no
parsing. Tenants are shown as ``repr`` cut to 100 characters: they are arbitrary user strings.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

from fairq.job import Lease

log = logging.getLogger("fairq.worker")

TENANT_CHARS = 100
ERROR_CHARS = 8000  # the most of an error (message and traceback) a store keeps


class Outcome(str, Enum):
    """How one attempt of a job ended, as logged in ``outcome``."""

    SUCCEEDED = "succeeded"  # acked
    RETRYING = "retrying"  # failed; scheduled to run again after a back-off
    DEAD = "dead"  # failed for good (attempts exhausted, or retrying cannot help)
    LEASE_LOST = "lease_lost"  # the job ended, but its lease had already gone back
    HANDED_BACK = "handed_back"  # released unfinished at shutdown; the attempt does not count
    ERROR = "error"  # the store could not record the outcome; the lease will expire

    def __str__(self) -> str:
        return self.value


LEVELS = {
    Outcome.SUCCEEDED: logging.DEBUG,
    Outcome.RETRYING: logging.WARNING,
    Outcome.DEAD: logging.ERROR,
    Outcome.LEASE_LOST: logging.WARNING,
    Outcome.HANDED_BACK: logging.WARNING,
    Outcome.ERROR: logging.ERROR,
}


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


def log_job_end(
    lease: Lease,
    outcome: Outcome,
    duration: float,
    *,
    error: str | None = None,
    exc_info: BaseException | None = None,
) -> None:
    """One line for the end of one attempt; ``exc_info`` adds the traceback."""
    level = LEVELS[outcome]
    if not log.isEnabledFor(level):
        return  # nothing is built for a line nobody reads
    fields = job_fields(lease, "job_end")
    fields["outcome"] = str(outcome)
    fields["duration_ms"] = round(duration * 1000, 1)
    fields["error"] = error
    log.log(
        level,
        "job %s %s tenant=%s queue=%s attempt=%d/%d outcome=%s duration_ms=%.1f%s",
        lease.job_id,
        lease.name,
        fields["tenant"],
        lease.queue,
        lease.attempt,
        lease.max_attempts,
        outcome,
        fields["duration_ms"],
        f" error={error}" if error else "",
        extra=fields,
        exc_info=exc_info,
    )


def describe(exc: BaseException) -> str:
    """``TypeName: message``, the way a log line and a dead job's ``last_error`` start."""
    message = str(exc)
    return f"{type(exc).__qualname__}: {message}" if message else type(exc).__qualname__
