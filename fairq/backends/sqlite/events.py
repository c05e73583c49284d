"""The steps every event is made of (docs/internals/scheduler.md, "Events").

The tag arithmetic is ``fairq.policy.fairness``, called from Python inside the event's
transaction; SQLite is embedded, so this read-modify-write is as atomic as a stored procedure
and gives bit-identical floats to the reference model. Invariant kept by every step:
``tenants.start_tag`` is NULL exactly when the tenant is not eligible.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from fairq.backends.sqlite.records import JobRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.job import JobState
from fairq.policy import fairness


@dataclass
class QueueRow:
    name: str
    weight: float
    max_running: int | None
    vclock: float

    @classmethod
    def load(cls, db: sqlite3.Connection, name: str) -> QueueRow | None:
        row = db.execute(Q["queue_get"], {"name": name}).fetchone()
        if row is None:
            return None
        return cls(row["name"], row["weight"], row["max_running"], row["vclock"])

    def save_vclock(self, db: sqlite3.Connection) -> None:
        db.execute(Q["queue_set_vclock"], {"name": self.name, "vclock": self.vclock})


def vclock(db: sqlite3.Connection, queue: str) -> float:
    found = QueueRow.load(db, queue)
    return 0.0 if found is None else found.vclock


def eligible(tenant: TenantRow) -> bool:
    return fairness.is_eligible(tenant.ready, tenant.running, tenant.max_running)


def refresh(tenant: TenantRow, v: float) -> None:
    """A tenant that becomes eligible starts at max(F, V); one that stops leaves the index."""
    if not eligible(tenant):
        tenant.start = None
    elif tenant.start is None:
        tenant.start = fairness.start_tag(tenant.finish, v)


def retag(tenant: TenantRow, v: float) -> None:
    """After a run's cost is settled, an eligible tenant's start tag is max(F, V)."""
    tenant.start = fairness.start_tag(tenant.finish, v) if eligible(tenant) else None


def update_head(db: sqlite3.Connection, tenant: TenantRow) -> None:
    """Re-read the tenant's ready head (one index entry) after its FIFO changed."""
    row = db.execute(Q["tenant_head"], {"tenant_id": tenant.id}).fetchone()
    tenant.head_seq = None if row is None else row["seq"]


def make_ready(
    db: sqlite3.Connection, job: JobRow, tenant: TenantRow, now: float, v: float
) -> None:
    """Put a job (promoted, retried, expired, released or requeued) into its FIFO.

    Saves the job; the caller saves the tenant once its event is complete.
    """
    job.state = JobState.READY
    job.ready_at = now
    job.save(db)
    tenant.ready += 1
    update_head(db, tenant)
    refresh(tenant, v)


def end_run(job: JobRow, tenant: TenantRow, ended_at: float) -> None:
    """Charge the run's real cost in place of its estimate and free its slot."""
    assert job.started_at is not None
    charge = fairness.run_charge(job.started_at, ended_at)
    tenant.finish = fairness.finish_after_run(tenant.finish, job.cost, charge, tenant.weight)
    tenant.running -= 1
    job.deadline = None


def fail_run(
    db: sqlite3.Connection,
    job: JobRow,
    tenant: TenantRow,
    *,
    now: float,
    ended_at: float,
    error: str,
    retry_at: float | None,
) -> None:
    """End a failed attempt: dead when out of attempts or not retried, else ready or scheduled.

    Saves the job and the tenant. Failing never moves V, so it is read here.
    """
    v = vclock(db, tenant.queue)
    end_run(job, tenant, ended_at)
    tenant.failed += 1
    job.last_error = error
    if retry_at is None or job.attempts >= job.max_attempts:
        job.state = JobState.DEAD
        job.finished_at = now
        tenant.dead += 1
        job.save(db)
    elif retry_at <= now:
        make_ready(db, job, tenant, now, v)
    else:
        job.state = JobState.SCHEDULED
        job.run_at = retry_at
        tenant.scheduled += 1
        job.save(db)
    retag(tenant, v)
    tenant.save(db)
