"""Per-tenant transitions: the steps every event is made of (docs/internals/scheduler.md).

One implementation for every store that can call Python: the reference model applies these to
its records, SQLite and PostgreSQL to the rows of one transaction. They call ``fairness``,
``history`` and ``rate`` in one fixed order, so every double they write is the same in every
store (the Lua and SQL ports repeat the same expressions in the same order).

What stays with each store is its index: these functions only change the state they are given;
the model re-indexes its heaps after them, the SQL stores save their rows. Invariants kept:
``start`` is None exactly when the tenant is not eligible, and ``limited_until`` is set exactly
while it waits on its rate limit.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from fairq.policy import fairness, history, rate
from fairq.policy.rate import Rate


class TenantState(Protocol):
    """A tenant in one queue, as the transitions read and write it."""

    ready: int
    running: int
    finish: float  # F
    start: float | None  # S, set only while eligible
    tat: float | None  # GCRA theoretical arrival time
    limited_until: float | None  # set while waiting on its rate limit
    usage: float  # recent service, decaying
    usage_at: float


T = TypeVar("T", bound=TenantState)
T_contra = TypeVar("T_contra", bound=TenantState, contravariant=True)


class QueueState(Protocol[T_contra]):
    """A queue's clock V and history settings, and its tenants' effective settings (the
    tenant's own, else the queue's default: the model works them out, SQL rows store them)."""

    vclock: float

    @property
    def half_life(self) -> float | None: ...

    @property
    def max_debt(self) -> float: ...

    def weight_of(self, tenant: T_contra) -> float: ...

    def cap_of(self, tenant: T_contra) -> int | None: ...

    def rate_of(self, tenant: T_contra) -> Rate | None: ...


class SettledTenant(TenantState, Protocol):
    """A tenant state that holds its effective settings (the SQL stores' rows, kept current
    when settings change)."""

    weight: float
    max_running: int | None
    rate: Rate | None


class SettledQueue:
    """Base of a queue record whose tenants hold their effective settings: read them there."""

    def weight_of(self, tenant: SettledTenant) -> float:
        return tenant.weight

    def cap_of(self, tenant: SettledTenant) -> int | None:
        return tenant.max_running

    def rate_of(self, tenant: SettledTenant) -> Rate | None:
        return tenant.rate


class RunState(Protocol):
    """A running job, as far as charging its tenant goes."""

    charged: float  # what the current run has been charged so far
    deadline: float | None

    @property
    def started_at(self) -> float | None: ...


class StoredTenant(Protocol):
    """A tenant's counts of the jobs stored for it, and its rate state."""

    ready: int
    scheduled: int
    running: int
    dead: int
    kept: int  # succeeded jobs not yet pruned
    tat: float | None


def forgettable(tenant: StoredTenant, *, own_settings: bool, now: float) -> bool:
    """Whether pruning may forget the tenant: no job is stored for it, it has no settings of its
    own, and its rate state cannot matter (``tat`` None or past: GCRA then gives the same
    results as for a new tenant). A returning tenant starts like a new one (S = V)."""
    stored = tenant.ready + tenant.scheduled + tenant.running + tenant.dead + tenant.kept
    past = tenant.tat is None or tenant.tat <= now
    return stored == 0 and not own_settings and past


def eligible(queue: QueueState[T], tenant: T) -> bool:
    return fairness.is_eligible(
        tenant.ready,
        tenant.running,
        queue.cap_of(tenant),
        queue.weight_of(tenant),
        tenant.limited_until is not None,
    )


def refresh(queue: QueueState[T], tenant: T, now: float, *, returning: bool = False) -> None:
    """Enter or leave the eligible set. A tenant entering starts at max(F, V); one that
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


def retag(queue: QueueState[T], tenant: T) -> None:
    """After its finish tag moved, an eligible tenant's start tag is max(F, V)."""
    eligible_now = eligible(queue, tenant)
    tenant.start = fairness.start_tag(tenant.finish, queue.vclock) if eligible_now else None


def set_finish(queue: QueueState[T], tenant: T, finish: float, now: float) -> None:
    """Move the finish tag; the same amount is recorded as recent service."""
    half_life = history.usage_half_life(queue.half_life)
    tenant.usage = history.add_usage(
        tenant.usage, tenant.usage_at, now, half_life, finish - tenant.finish
    )
    tenant.usage_at = max(tenant.usage_at, now)
    tenant.finish = finish


def limit_until(queue: QueueState[T], tenant: T, now: float) -> float | None:
    """Recompute the rate hold: until the rate allows the next start, or none. Returns it, so
    a store that indexes holds can record it."""
    limit = queue.rate_of(tenant)
    until = None
    if limit is not None:
        until = rate.limited_until(tenant.tat, now, limit.interval, limit.tolerance)
    tenant.limited_until = until
    return until


def dispatch(
    queue: QueueState[T], tenant: T, job: RunState, estimate: float, now: float
) -> float | None:
    """Charge a handed-out job's estimate (``fairq.policy.cost.estimate``), advance V, and
    apply the tenant's rate limit.

    Returns the rate hold it set, if any (the tenant was not held: it was just picked)."""
    assert tenant.start is not None
    queue.vclock = tenant.start
    finish = fairness.finish_after_dispatch(tenant.start, estimate, queue.weight_of(tenant))
    set_finish(queue, tenant, finish, now)
    job.charged = estimate
    tenant.ready -= 1
    tenant.running += 1
    hold = None
    limit = queue.rate_of(tenant)
    if limit is not None:
        tenant.tat = rate.after_start(tenant.tat, now, limit.interval)
        hold = limit_until(queue, tenant, now)
    tenant.start = tenant.finish if eligible(queue, tenant) else None
    return hold


def end_run(
    queue: QueueState[T], tenant: T, job: RunState, ended_at: float | None, now: float
) -> None:
    """Charge the run's real cost in place of what it was charged so far; free its slot.

    ``ended_at=None``: the run's end is unknown (its lease expired: the worker died or lost
    the store). A crash is not consumption, so the run stays charged what it was so far (the
    estimate, raised by heartbeats) and ``F`` and usage are left as they are."""
    assert job.started_at is not None
    if ended_at is not None:
        finish = fairness.finish_after_run(
            tenant.finish,
            job.charged,
            fairness.run_charge(job.started_at, ended_at),
            queue.weight_of(tenant),
        )
        set_finish(queue, tenant, finish, now)
    tenant.running -= 1
    job.deadline = None


def charge_progress(queue: QueueState[T], tenant: T, job: RunState, now: float) -> bool:
    """A heartbeat charges the time a job has run beyond what was charged for it.

    Returns whether the tenant was retagged (it is eligible and its start tag moved)."""
    assert job.started_at is not None
    finish, job.charged = fairness.charge_progress(
        tenant.finish, job.charged, now - job.started_at, queue.weight_of(tenant)
    )
    if finish == tenant.finish:
        return False
    set_finish(queue, tenant, finish, now)
    if tenant.start is None:
        return False
    retag(queue, tenant)
    return True
