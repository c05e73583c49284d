"""A job whose name this worker's app does not declare: handed back for a worker that does.

During a rolling deploy, a job type that new code enqueues may reach a worker still on the old
code; workers of two apps may share a queue. Such a job is released with a note (kept as its
last error) to run again after a back-off that grows with its age (half of it, from 1 s up to
60 s), its attempt not counted, so a worker that knows it takes it in time. Only once it is
``timeout`` seconds old (since it was enqueued) with nobody having run it, it is dead, with an
error saying so. Rare path: it reads the job's enqueue time with ``get_jobs``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fairq.contract import Backend, FailParams, GetJobsParams, ReleaseParams
from fairq.errors import LeaseError
from fairq.instrument import JobEnd, Outcome
from fairq.instrument.hooks import Hooks, default_hooks
from fairq.job import Lease
from fairq.worker.joblog import describe
from fairq.worker.lost import why_lost

DEFAULT_TIMEOUT = 3600.0
FIRST_BACKOFF, MAX_BACKOFF = 1.0, 60.0


class UnknownJobs:
    """Hands back (or, once too old, dead-letters) the jobs the worker's app does not declare."""

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Callable[[], float],
        timeout: float,
        app_name: str,
        declared: Iterable[str],
        hooks: Hooks | None = None,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.hooks = hooks or default_hooks(clock)
        self.timeout = timeout
        self.app_name = app_name
        self.declared = ", ".join(sorted(declared)) or "(none)"

    def handle(self, lease: Lease, deadline: float) -> None:
        """Release the job for later, or fail it for good; logs either way, raises nothing."""
        try:
            self._handle(lease)
        except LeaseError:
            why = why_lost(self.backend, [(lease, deadline)], self.clock())[lease.token]
            self.hooks.job_end(lease, JobEnd(Outcome.LEASE_LOST, 0.0, f"unknown job; {why}"))
        except Exception as exc:
            self.hooks.job_end(lease, JobEnd(Outcome.ERROR, 0.0, describe(exc), exc))

    def _handle(self, lease: Lease) -> None:
        found = self.backend.get_jobs(GetJobsParams(ids=[lease.job_id]))
        now = self.clock()
        enqueued_at = found[0].enqueued_at if found else now
        age = max(now - enqueued_at, 0.0)
        unknown = (
            f"no worker here knows job {lease.name!r} (worker app {self.app_name} declares: "
            f"{self.declared})"
        )
        if age >= self.timeout:
            error = (
                f"{unknown}, and none ran it within unknown_job_timeout ({self.timeout:g} s) of "
                "its enqueue; run a worker with the app that declares it, then requeue the job"
            )
            params = FailParams(token=lease.token, now=now, error=error, retry_at=None)
            self.backend.fail(params)
            self.hooks.job_end(lease, JobEnd(Outcome.DEAD, 0.0, error))
            return
        backoff = min(max(age / 2, FIRST_BACKOFF), MAX_BACKOFF)
        run_at = min(now + backoff, enqueued_at + self.timeout)
        left = enqueued_at + self.timeout - now
        note = (
            f"{unknown}; handed back for a worker that knows it (again in {run_at - now:.1f} s; "
            f"dead if none has run it {left:.0f} s from now)"
        )
        self.backend.release(ReleaseParams(token=lease.token, now=now, run_at=run_at, note=note))
        self.hooks.job_end(lease, JobEnd(Outcome.HANDED_BACK, 0.0, note))
