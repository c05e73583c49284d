"""The steps events share that touch SQLite rows (docs/internals/scheduler.md, "Events").

The per-tenant transitions are ``fairq.policy.tenant``, the very functions the reference model
applies, called from Python inside the event's transaction; SQLite is embedded, so this
read-modify-write is as atomic as a stored procedure and gives bit-identical floats. What is
left here is SQLite's own: effective settings stored on the row, the head re-read from the
jobs index, and saving.
"""

from __future__ import annotations

import sqlite3

from fairq.backends.sqlite import figures
from fairq.backends.sqlite.records import JobRow, QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.job import JobState
from fairq.policy.histogram import CANCELLED, EXPIRED, FAILED
from fairq.policy.tenant import end_run, limit_until, refresh, retag


def resettle(tenant: TenantRow, queue: QueueRow, now: float) -> None:
    """Settings changed: effective values are the tenant's own, else the queue's; then the
    rate hold is recomputed and eligibility refreshed."""
    tenant.weight = tenant.own_weight if tenant.own_weight is not None else queue.weight
    tenant.max_running = (
        tenant.own_max_running if tenant.own_max_running is not None else queue.max_running
    )
    tenant.rate = tenant.own_rate if tenant.own_rate is not None else queue.rate
    limit_until(queue, tenant, now)
    refresh(queue, tenant, now)


def update_head(db: sqlite3.Connection, tenant: TenantRow) -> None:
    """Re-read the tenant's ready head (one index entry) after its FIFO changed."""
    row = db.execute(Q["tenant_head"], {"tenant_id": tenant.id}).fetchone()
    tenant.head_seq = None if row is None else row["seq"]


def make_ready(
    db: sqlite3.Connection,
    job: JobRow,
    tenant: TenantRow,
    queue: QueueRow,
    now: float,
    ready_at: float,
) -> None:
    """Put a job (promoted, retried, expired, released or requeued) into its FIFO.

    Saves the job; the caller saves the tenant once its event is complete.
    """
    returning = tenant.ready == 0
    job.state = JobState.READY
    job.ready_at = ready_at
    job.save(db)
    tenant.ready += 1
    update_head(db, tenant)
    refresh(queue, tenant, now, returning=returning)


def fail_run(
    db: sqlite3.Connection,
    job: JobRow,
    tenant: TenantRow,
    *,
    now: float,
    ended_at: float | None,
    error: str,
    retry_at: float | None,
) -> None:
    """End a failed attempt: dead when out of attempts or not retried, else ready or scheduled;
    cancelled when the job has a cancel request (fairq/cancel.py: a failure its worker
    reports is its stop, not counted failed; an expired lease is).

    Saves the job and the tenant. Failing never moves V.
    """
    counts = figures.tally(db)
    if counts is not None and job.started_at is not None:
        ran = None if ended_at is None else ended_at - job.started_at  # None: lease expired
        outcome = CANCELLED if job.cancel_requested else FAILED
        counts.ended(job.tenant_id, EXPIRED if ended_at is None else outcome, ran)
    queue = QueueRow.get(db, tenant.queue)
    end_run(queue, tenant, job, ended_at, now)
    job.last_error = error
    if not job.cancel_requested or ended_at is None:
        tenant.failed += 1  # a stop its worker reports after a cancel request is no failure
    if job.cancel_requested:
        end_cancelled(db, job, tenant, now)
    elif retry_at is None or job.attempts >= job.max_attempts:
        job.state = JobState.DEAD
        job.finished_at = now
        tenant.dead += 1
        job.save(db)
    elif retry_at <= now:
        make_ready(db, job, tenant, queue, now, now)
    else:
        job.state = JobState.SCHEDULED
        job.run_at = retry_at
        tenant.scheduled += 1
        job.save(db)
    retag(queue, tenant)
    tenant.save(db)


def end_cancelled(db: sqlite3.Connection, job: JobRow, tenant: TenantRow, now: float) -> None:
    """A job neither queued nor running any more ends cancelled, kept (as a succeeded job is)
    until the retention prunes it. Saves the job; the caller saves the tenant."""
    job.state = JobState.CANCELLED
    job.finished_at = now
    job.save(db)
    tenant.cancelled += 1
    tenant.kept += 1
