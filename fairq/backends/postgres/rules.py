"""Per-tenant transitions on rows, one function per step of ``fairq/model/rules.py``.

Events (events.py) apply these to the rows of one transaction. They call the very ``policy``
functions the reference model calls, in the same order, so every double they write is the one
the model computes; the server-side dispatch and ack (migrations/0004_limits.sql) repeat the
same expressions in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairq.backends.postgres.records import JobRow, TenantRow
from fairq.policy import fairness, history, rate


@dataclass
class QueueState:
    """What the rules read of a queue: its clock V and its history settings."""

    vclock: float
    half_life: float | None
    max_debt: float

    @property
    def usage_half_life(self) -> float:
        return self.half_life if self.half_life is not None else history.DEFAULT_HALF_LIFE


def eligible(tenant: TenantRow) -> bool:
    return fairness.is_eligible(
        tenant.ready,
        tenant.running,
        tenant.max_running,
        tenant.weight,
        tenant.limited_until is not None,
    )


def refresh(queue: QueueState, tenant: TenantRow, now: float, *, returning: bool = False) -> None:
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


def retag(queue: QueueState, tenant: TenantRow) -> None:
    """After its finish tag moved, an eligible tenant's start tag is max(F, V)."""
    tenant.start = fairness.start_tag(tenant.finish, queue.vclock) if eligible(tenant) else None


def set_finish(queue: QueueState, tenant: TenantRow, finish: float, now: float) -> None:
    """Move the finish tag; the same amount is recorded as recent service."""
    tenant.usage = history.add_usage(
        tenant.usage, tenant.usage_at, now, queue.usage_half_life, finish - tenant.finish
    )
    tenant.usage_at = max(tenant.usage_at, now)
    tenant.finish = finish


def limit_until(tenant: TenantRow, now: float) -> None:
    """Recompute the rate hold: until the rate allows the next start, or none."""
    limit = tenant.rate
    until = None
    if limit is not None:
        until = rate.limited_until(tenant.tat, now, limit.interval, limit.tolerance)
    tenant.limited_until = until


def end_run(queue: QueueState, tenant: TenantRow, job: JobRow, ended_at: float, now: float) -> None:
    """Charge the run's real cost in place of what it was charged so far; free its slot."""
    assert job.started_at is not None
    finish = fairness.finish_after_run(
        tenant.finish,
        job.charged,
        fairness.run_charge(job.started_at, ended_at),
        tenant.weight,
    )
    set_finish(queue, tenant, finish, now)
    tenant.running -= 1
    job.deadline = None


def charge_progress(queue: QueueState, tenant: TenantRow, job: JobRow, now: float) -> None:
    """A heartbeat charges the time a job has run beyond what was charged for it."""
    assert job.started_at is not None
    finish, job.charged = fairness.charge_progress(
        tenant.finish, job.charged, now - job.started_at, tenant.weight
    )
    if finish != tenant.finish:
        set_finish(queue, tenant, finish, now)
        if tenant.start is not None:
            retag(queue, tenant)
