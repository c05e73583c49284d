"""A queue's recorded jobs, read back for a replay (``Backend.history``, fairq/sim/replay.py).

A read-only call, paged so a reader holds one page at a time: the jobs of one queue enqueued in
``[since, until)``, in pages of at most ``limit``, each page naming the ``cursor`` of the next
(None: the last page). What a store keeps of a finished job is what its retention keeps
(``MaintainParams.retention``): a pruned job is simply not there.

A page holds about ``limit`` jobs at most (Redis takes it as a hint and may give a small queue
whole), maybe fewer, even none, before the last. A job that moves while
it is read (acked, retried) may come twice, the later copy the newer; a job stored all through
the read comes at least once. So a reader keeps the last copy of each id. Reading takes no lock
that live work waits on and changes nothing (each store says how, in its history module).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairq.errors import ConfigError
from fairq.job import JobState, StoredJob
from fairq.policy.bounds import check_int
from fairq.policy.queues import check_queue_name

_STATES = {state.value: state for state in JobState}  # faster than JobState(text) per row
#: The most jobs one page may ask for: a page is held whole in memory.
MAX_PAGE = 10_000


@dataclass(frozen=True, kw_only=True)
class HistoryParams:
    """The jobs of ``queue`` enqueued from ``since`` (included) to ``until`` (excluded), one page
    from ``cursor`` (None: the first; then the cursor the last page gave)."""

    queue: str
    since: float
    until: float
    cursor: str | None = None
    limit: int = 1_000

    def __post_init__(self) -> None:
        check_queue_name(self.queue)
        check_int("limit", self.limit)
        if self.limit > MAX_PAGE:
            raise ConfigError(f"limit must be at most {MAX_PAGE:,} jobs a page, got {self.limit}")
        if not (math.isfinite(self.since) and math.isfinite(self.until)):
            raise ConfigError(f"since and until must be finite, got {self.since}, {self.until}")
        if not self.since < self.until:
            raise ConfigError(f"since ({self.since}) must be before until ({self.until})")


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedJob:
    """What a store keeps of one job for a replay. Times are the store's (seconds since the
    epoch on a store's own clock); ``started_at`` and ``finished_at`` are its last run's, None
    before it started or ended (``finished_at`` is also set for a job cancelled unstarted)."""

    id: str
    name: str
    tenant: str
    state: JobState
    priority: int
    attempts: int
    cost: float  # as declared
    enqueued_at: float
    run_at: float  # when it was (last) due: later than enqueued_at for a scheduled job
    started_at: float | None
    finished_at: float | None

    @classmethod
    def from_row(cls, row: Any) -> RecordedJob:
        """A row of the SQL stores' history queries (columns named as the fields)."""
        return cls(
            id=row["id"],
            name=row["name"],
            tenant=row["tenant"],
            state=_STATES[row["state"]],
            priority=int(row["priority"]),
            attempts=int(row["attempts"]),
            cost=float(row["cost"]),
            enqueued_at=float(row["enqueued_at"]),
            run_at=float(row["run_at"]),
            started_at=row["started_at"],
            finished_at=row["finished_at"],
        )

    @classmethod
    def of(cls, job: StoredJob) -> RecordedJob:
        return cls(
            id=job.id,
            name=job.name,
            tenant=job.tenant,
            state=job.state,
            priority=job.priority,
            attempts=job.attempts,
            cost=job.cost,
            enqueued_at=job.enqueued_at,
            run_at=job.run_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )


@dataclass(frozen=True, kw_only=True)
class HistoryPage:
    jobs: Sequence[RecordedJob]
    cursor: str | None  # where the next page starts; None: this was the last
