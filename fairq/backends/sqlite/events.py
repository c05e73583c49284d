"""The steps every event is made of (docs/internals/scheduler.md, "Events").

The arithmetic is ``fairq.policy`` (fairness, rate, history), called from Python inside the
event's transaction; SQLite is embedded, so this read-modify-write is as atomic as a stored
procedure and gives bit-identical floats to the reference model (``fairq/model/rules.py``,
which these steps follow line by line). Invariants kept by every step: ``tenants.start_tag``
is NULL exactly when the tenant is not eligible, and ``limited_until`` is set exactly while it
waits on its rate limit.
"""

from __future__ import annotations

import sqlite3

from fairq.backends.sqlite.records import JobRow, QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.job import JobState
from fairq.policy import fairness, history, rate


def eligible(tenant: TenantRow) -> bool:
    return fairness.is_eligible(
        tenant.ready,
        tenant.running,
        tenant.max_running,
        tenant.weight,
        tenant.limited_until is not None,
    )


def refresh(tenant: TenantRow, queue: QueueRow, now: float, *, returning: bool = False) -> None:
    """Enter or leave the eligible index. A tenant entering starts at max(F, V); one that
    returns from idle on a queue with a half-life starts behind by its recent service."""
    if not eligible(tenant):
        tenant.start = None
    elif tenant.start is None:
        if returning and queue.half_life is not None:
            debt = history.decayed(tenant.usage, tenant.usage_at, now, queue.half_life)
            tenant.start = history.history_start(tenant.finish, queue.vclock, debt, queue.max_debt)
            tenant.finish = tenant.start  # carried in F, so a later retag keeps the debt
        else:
            tenant.start = fairness.start_tag(tenant.finish, queue.vclock)


def retag(tenant: TenantRow, queue: QueueRow) -> None:
    """After its finish tag moved, an eligible tenant's start tag is max(F, V)."""
    tenant.start = fairness.start_tag(tenant.finish, queue.vclock) if eligible(tenant) else None


def set_finish(tenant: TenantRow, queue: QueueRow, finish: float, now: float) -> None:
    """Move the finish tag; the same amount is recorded as recent service."""
    tenant.usage = history.add_usage(
        tenant.usage, tenant.usage_at, now, queue.usage_half_life(), finish - tenant.finish
    )
    tenant.usage_at = max(tenant.usage_at, now)
    tenant.finish = finish


def limit_until(tenant: TenantRow, now: float) -> None:
    """Hold the tenant out of the eligible index until its rate allows its next start."""
    limit = tenant.rate
    tenant.limited_until = (
        None
        if limit is None
        else rate.limited_until(tenant.tat, now, limit.interval, limit.tolerance)
    )


def resettle(tenant: TenantRow, queue: QueueRow, now: float) -> None:
    """Settings changed: effective values are the tenant's own, else the queue's; then the
    rate hold is recomputed and eligibility refreshed."""
    tenant.weight = tenant.own_weight if tenant.own_weight is not None else queue.weight
    tenant.max_running = (
        tenant.own_max_running if tenant.own_max_running is not None else queue.max_running
    )
    tenant.rate = tenant.own_rate if tenant.own_rate is not None else queue.rate
    limit_until(tenant, now)
    refresh(tenant, queue, now)


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
    refresh(tenant, queue, now, returning=returning)


def dispatch(tenant: TenantRow, queue: QueueRow, job: JobRow, now: float) -> None:
    """Charge a handed-out job's estimate, advance V, and apply the tenant's rate limit.

    The caller has updated the job's row and re-reads the tenant's head before saving."""
    assert tenant.start is not None
    queue.vclock = tenant.start
    finish = fairness.finish_after_dispatch(tenant.start, job.cost, tenant.weight)
    set_finish(tenant, queue, finish, now)
    job.charged = job.cost
    tenant.ready -= 1
    tenant.running += 1
    limit = tenant.rate
    if limit is not None:
        tenant.tat = rate.after_start(tenant.tat, now, limit.interval)
        limit_until(tenant, now)
    tenant.start = tenant.finish if eligible(tenant) else None


def end_run(job: JobRow, tenant: TenantRow, queue: QueueRow, ended_at: float, now: float) -> None:
    """Charge the run's real cost in place of what it was charged so far; free its slot."""
    assert job.started_at is not None
    finish = fairness.finish_after_run(
        tenant.finish, job.charged, fairness.run_charge(job.started_at, ended_at), tenant.weight
    )
    set_finish(tenant, queue, finish, now)
    tenant.running -= 1
    job.deadline = None


def charge_progress(tenant: TenantRow, queue: QueueRow, job: JobRow, now: float) -> None:
    """A heartbeat charges the time a job has run beyond what was charged for it."""
    assert job.started_at is not None
    finish, job.charged = fairness.charge_progress(
        tenant.finish, job.charged, now - job.started_at, tenant.weight
    )
    if finish != tenant.finish:
        set_finish(tenant, queue, finish, now)
        if tenant.start is not None:
            retag(tenant, queue)


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

    Saves the job and the tenant. Failing never moves V.
    """
    queue = QueueRow.get(db, tenant.queue)
    end_run(job, tenant, queue, ended_at, now)
    tenant.failed += 1
    job.last_error = error
    if retry_at is None or job.attempts >= job.max_attempts:
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
    retag(tenant, queue)
    tenant.save(db)
