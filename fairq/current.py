"""The running job, as its own code sees it: ``fairq.current_job()``.

A job's code may be asked to stop (``App.cancel`` on a running job: fairq/cancel.py). The
worker learns of it within about a second (fairq/worker/cancels.py), then: an ``async def``
job is cancelled at once (``asyncio.CancelledError`` at its next ``await``); an iterative job
stops at its next cursor; a ``def`` job cannot be interrupted, so it looks when it can::

    @app.job(tenant="account")
    def rebuild(account: str) -> None:
        for part in parts(account):
            fairq.current_job().raise_if_cancelled()  # JobCancelled: the job ends cancelled
            rebuild_part(part)

The worker sets the job for the code it runs (a context variable: each thread and each
asyncio task sees its own job); outside a job, ``current_job()`` raises.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

from fairq.errors import FairqError, JobCancelled
from fairq.job import Lease


class Running(Protocol):
    """What the worker keeps of a running job (fairq.worker.running.Running)."""

    lease: Lease
    cancel_requested: bool


#: The job the current thread or task runs; set by the worker around a job's code.
RUNNING: ContextVar[Running | None] = ContextVar("fairq_running_job", default=None)


class NoCurrentJob(FairqError, LookupError):
    """``fairq.current_job()`` was called outside a job run by a fairq worker."""


class JobContext:
    """The job this code runs as: its lease's details, and whether it was asked to stop."""

    __slots__ = ("_running",)

    def __init__(self, running: Running) -> None:
        self._running = running

    @property
    def lease(self) -> Lease:
        """The lease the job runs under: id, name, tenant, queue, attempt, headers."""
        return self._running.lease

    @property
    def job_id(self) -> str:
        return self._running.lease.job_id

    @property
    def cancel_requested(self) -> bool:
        """Someone asked the job to stop (``App.cancel``); the worker sees a request within
        about a second (fairq/worker/cancels.py), so it turns True that late."""
        return self._running.cancel_requested

    def raise_if_cancelled(self) -> None:
        """Raise ``JobCancelled`` if the job was asked to stop: let it propagate, and the job
        ends ``cancelled`` (never retried)."""
        if self._running.cancel_requested:
            lease = self._running.lease
            raise JobCancelled(
                f"job {lease.name!r} (id {lease.job_id}) was asked to stop (a cancel request); "
                "it ends cancelled"
            )


def current_job() -> JobContext:
    """The job the calling code runs as; NoCurrentJob outside a job run by a fairq worker."""
    running = RUNNING.get()
    if running is None:
        raise NoCurrentJob(
            "fairq.current_job() is only available inside a job run by a fairq worker (its "
            "own thread or task); a job called directly, as a plain function, has none"
        )
    return JobContext(running)
