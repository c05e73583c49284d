"""Cancelling jobs: the contract's ``Backend.cancel`` (re-exported by fairq.contract).

A scheduled or ready job is cancelled at once: it leaves its tenant's queue (a tenant whose
last ready job goes leaves the eligible index, exactly as after a dispatch of it) and ends
``cancelled``. A running job cannot be taken from its worker: the store records a cancel
request, which its worker learns within about a second (fairq/worker/cancels.py: a look at its
running jobs' ``JobInfo.cancel_requested``; ``HeartbeatResult.cancelled`` brings it too) and
which the job's code can see (``fairq.current_job()``; an ``async def`` job is cancelled, an
iterative one stops at its next cursor). From then on the job never runs again: a failed
attempt, a hand-back or an expired lease end it ``cancelled`` instead of retrying it; only an
ack (it finished first) ends it ``succeeded``. docs/cancellation.md has the user's view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from fairq.job import JobState

#: The last error a job cancelled before it ran is given, so ``JobInfo`` says why it ended.
CANCELLED_NOTE = "cancelled on request"


class CancelOutcome(str, Enum):
    """What a cancel did to one job."""

    CANCELLED = "cancelled"  # it was scheduled or ready: cancelled now, it never runs
    REQUESTED = "requested"  # it is running: its worker is asked to stop it (again, if asked)
    FINISHED = "finished"  # it had already ended (succeeded, dead, cancelled): nothing changed
    UNKNOWN = "unknown"  # no job has that id (never enqueued here, or deleted after retention)

    def __str__(self) -> str:
        return self.value


def outcome_for(state: JobState) -> CancelOutcome:
    """What a cancel does to a job in ``state``: the one rule of every store (Redis's
    cancel.lua states it again in Lua). Only a job still waiting can be taken away; a running
    one belongs to its worker until it stops."""
    if state is JobState.RUNNING:
        return CancelOutcome.REQUESTED
    if state in (JobState.SCHEDULED, JobState.READY):
        return CancelOutcome.CANCELLED
    return CancelOutcome.FINISHED


@dataclass(frozen=True, kw_only=True)
class CancelParams:
    """Cancel the jobs ``ids``, one after another in the order given, atomically per job."""

    ids: Sequence[str]
    now: float


@dataclass(frozen=True, kw_only=True)
class CancelResult:
    outcomes: Sequence[CancelOutcome]  # one per id asked, in order
