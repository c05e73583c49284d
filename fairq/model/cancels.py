"""The reference model's cancels and kept results (fairq/cancel.py, fairq/results.py).

A job cancelled while scheduled or ready is taken out of its heap (rebuilt: a cancel is an
operator's call, not a hot path, and the heaps stay free of entries that point at ended jobs)
and its tenant refreshed, so a tenant whose last ready job goes leaves the eligible index as
after a dispatch. A cancelled job is kept like a succeeded one (counted in ``kept``) until the
retention prunes it; a succeeded job with a result is kept until its result expires.
"""

from __future__ import annotations

import heapq
import threading

from fairq.cancel import CANCELLED_NOTE, CancelOutcome, CancelParams, CancelResult, outcome_for
from fairq.job import JobState
from fairq.model import rules
from fairq.model.figures import FigureTable
from fairq.model.reads import Reads
from fairq.model.state import Job, Queue, Tenant
from fairq.policy.histogram import CANCELLED
from fairq.policy.tenant import forgettable


class Cancels(Reads):
    _changed: threading.Condition
    _figures: FigureTable

    def cancel(self, params: CancelParams) -> CancelResult:
        with self._changed:
            outcomes = [self._cancel_one(job_id, params.now) for job_id in params.ids]
            self._changed.notify_all()  # a worker waiting on an emptied tenant sees it
            return CancelResult(outcomes=outcomes)

    def _cancel_one(self, job_id: str, now: float) -> CancelOutcome:
        job = self._jobs.get(job_id)
        if job is None:
            return CancelOutcome.UNKNOWN
        outcome = outcome_for(job.state)
        if outcome is CancelOutcome.REQUESTED:
            job.cancel_requested = True
        if outcome is not CancelOutcome.CANCELLED:
            return outcome
        queue = self._queues[job.queue]
        tenant = queue.tenants[job.tenant]
        if job.state is JobState.READY:
            tenant.ready_heap.remove((-job.priority, job.seq))
            heapq.heapify(tenant.ready_heap)
            tenant.ready -= 1
        else:
            queue.scheduled.remove((job.run_at, job.seq))
            heapq.heapify(queue.scheduled)
            tenant.scheduled -= 1
        job.last_error = CANCELLED_NOTE
        self._cancelled(tenant, job, now)
        rules.refresh(queue, tenant, now)  # its head or its eligibility may have changed
        return CancelOutcome.CANCELLED

    def _cancelled(self, tenant: Tenant, job: Job, now: float) -> None:
        """A job that is neither queued nor running any more ends cancelled, kept like a
        succeeded job until the retention prunes it."""
        job.state = JobState.CANCELLED
        job.finished_at = now
        tenant.cancelled += 1
        tenant.kept += 1

    def _run_cancelled(self, queue: Queue, tenant: Tenant, job: Job, now: float) -> None:
        """A run its worker ended after a cancel request (a failure or a hand-back): counted
        as a cancelled run (its slot is already freed), and the job ends cancelled."""
        assert job.started_at is not None
        self._figures.ended(queue.name, tenant.name, CANCELLED, now - job.started_at, now)
        self._cancelled(tenant, job, now)

    def _prune_done(self, before: float, now: float) -> int:
        """Delete the succeeded and cancelled jobs that ended before ``before``, but those
        that keep a result, which go once it expires; a tenant whose last stored job goes is
        forgotten."""
        old = [j for j in self._jobs.values() if _prunable(j, before, now)]
        for job in old:
            del self._jobs[job.id]
            del self._by_seq[job.seq]
            queue = self._queues[job.queue]
            tenant = queue.tenants[job.tenant]
            tenant.kept -= 1
            if forgettable(tenant, own_settings=tenant.own_settings(), now=now):
                del queue.tenants[job.tenant]  # heap entries naming it are now stale
        return len(old)


def _prunable(job: Job, before: float, now: float) -> bool:
    if job.state not in (JobState.SUCCEEDED, JobState.CANCELLED):
        return False
    if job.result_until is not None:
        return job.result_until <= now
    return (job.finished_at or 0.0) < before
