"""Per-tenant transitions of the scheduler, shared by every event of the model.

Each function applies one row of docs/internals/scheduler.md's event table to a tenant; the
arithmetic itself comes from ``fairq.policy`` so stores can reproduce it bit for bit.
"""

from __future__ import annotations

import heapq

from fairq.model.state import Job, Queue, Tenant
from fairq.policy import fairness, history, rate


def eligible(queue: Queue, tenant: Tenant) -> bool:
    return fairness.is_eligible(
        tenant.ready,
        tenant.running,
        queue.cap_of(tenant),
        queue.weight_of(tenant),
        tenant.limited_until is not None,
    )


def refresh(queue: Queue, tenant: Tenant, now: float, *, returning: bool = False) -> None:
    """Enter or leave the eligible index. A tenant entering starts at max(F, V); one that
    returns from idle on a queue with a half-life starts behind by its recent service."""
    if not eligible(queue, tenant):
        tenant.start = None
    elif tenant.start is None:
        if returning and queue.half_life is not None:
            debt = history.decayed(tenant.usage, tenant.usage_at, now, queue.half_life)
            tenant.start = history.history_start(tenant.finish, queue.vclock, debt, queue.max_debt)
            tenant.finish = tenant.start  # carried in F, so a later retag keeps the debt
        else:
            tenant.start = fairness.start_tag(tenant.finish, queue.vclock)
    queue.index(tenant)


def retag(queue: Queue, tenant: Tenant) -> None:
    """After its finish tag moved, an eligible tenant's start tag is max(F, V)."""
    tenant.start = None
    if eligible(queue, tenant):
        tenant.start = fairness.start_tag(tenant.finish, queue.vclock)
    queue.index(tenant)


def set_finish(queue: Queue, tenant: Tenant, finish: float, now: float) -> None:
    """Move the finish tag; the same amount is recorded as recent service."""
    tenant.usage = history.add_usage(
        tenant.usage, tenant.usage_at, now, queue.usage_half_life(), finish - tenant.finish
    )
    tenant.usage_at = max(tenant.usage_at, now)
    tenant.finish = finish


def dispatch(queue: Queue, tenant: Tenant, job: Job, now: float) -> None:
    """Charge a handed-out job's estimate, advance V, and apply the tenant's rate limit."""
    assert tenant.start is not None
    queue.vclock = tenant.start
    finish = fairness.finish_after_dispatch(tenant.start, job.cost, queue.weight_of(tenant))
    set_finish(queue, tenant, finish, now)
    job.charged = job.cost
    tenant.ready -= 1
    tenant.running += 1
    limit = queue.rate_of(tenant)
    if limit is not None:
        tenant.tat = rate.after_start(tenant.tat, now, limit.interval)
        limit_until(queue, tenant, now)
    tenant.start = tenant.finish if eligible(queue, tenant) else None
    queue.index(tenant)


def limit_until(queue: Queue, tenant: Tenant, now: float) -> None:
    """Hold the tenant out of the eligible index until its rate allows its next start."""
    limit = queue.rate_of(tenant)
    until = None
    if limit is not None:
        until = rate.limited_until(tenant.tat, now, limit.interval, limit.tolerance)
    tenant.limited_until = until
    if until is not None:
        heapq.heappush(queue.limited, (until, tenant.name))


def end_run(queue: Queue, tenant: Tenant, job: Job, ended_at: float, now: float) -> None:
    """Charge the run's real cost in place of what it was charged so far; free its slot."""
    assert job.started_at is not None
    finish = fairness.finish_after_run(
        tenant.finish,
        job.charged,
        fairness.run_charge(job.started_at, ended_at),
        queue.weight_of(tenant),
    )
    set_finish(queue, tenant, finish, now)
    tenant.running -= 1
    job.deadline = None


def charge_progress(queue: Queue, tenant: Tenant, job: Job, now: float) -> None:
    """A heartbeat charges the time a job has run beyond what was charged for it."""
    assert job.started_at is not None
    finish, job.charged = fairness.charge_progress(
        tenant.finish, job.charged, now - job.started_at, queue.weight_of(tenant)
    )
    if finish != tenant.finish:
        set_finish(queue, tenant, finish, now)
        if tenant.start is not None:
            retag(queue, tenant)


def first_limited(queue: Queue, now: float) -> Tenant | None:
    """The tenant whose rate limit ends first, if it ends by ``now`` (stale entries dropped)."""
    while queue.limited:
        until, name = queue.limited[0]
        tenant = queue.tenants[name]
        if tenant.limited_until != until:
            heapq.heappop(queue.limited)
            continue
        return tenant if until <= now else None
    return None


def next_limited(queue: Queue) -> float | None:
    while queue.limited:
        until, name = queue.limited[0]
        if queue.tenants[name].limited_until == until:
            return until
        heapq.heappop(queue.limited)
    return None
