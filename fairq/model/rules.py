"""The model's side of the per-tenant transitions: its heap indexes.

The transitions themselves are ``fairq.policy.tenant``, shared with every store; each wrapper
here applies one and then records the result in the queue's eligible heap (``queue.index``) or
its heap of rate holds.
"""

from __future__ import annotations

import heapq

from fairq.model.state import Job, Queue, Tenant
from fairq.policy import cost, fairness
from fairq.policy import tenant as transitions
from fairq.policy.tenant import end_run

__all__ = [
    "charge_progress",
    "dispatch",
    "end_run",
    "first_limited",
    "learn",
    "limit_until",
    "next_limited",
    "refresh",
    "retag",
]


def refresh(queue: Queue, tenant: Tenant, now: float, *, returning: bool = False) -> None:
    transitions.refresh(queue, tenant, now, returning=returning)
    queue.index(tenant)


def retag(queue: Queue, tenant: Tenant) -> None:
    transitions.retag(queue, tenant)
    queue.index(tenant)


def dispatch(queue: Queue, tenant: Tenant, job: Job, now: float) -> None:
    """Charge the job the estimate of its (queue, name) (fairq.policy.cost)."""
    runs, mean = queue.costs.get(job.name, (0, 0.0))
    charge = cost.estimate(job.cost, job.learn_cost, runs, mean)
    _hold(queue, tenant, transitions.dispatch(queue, tenant, job, charge, now))
    queue.index(tenant)


def learn(queue: Queue, job: Job, ended_at: float) -> None:
    """Fold a claimed run's real time into its (queue, name)'s estimate (fairq.policy.cost)."""
    assert job.started_at is not None
    if job.claimed:
        runs, mean = queue.costs.get(job.name, (0, 0.0))
        sample = fairness.run_charge(job.started_at, ended_at)
        queue.costs[job.name] = cost.learn(runs, mean, sample)


def limit_until(queue: Queue, tenant: Tenant, now: float) -> None:
    _hold(queue, tenant, transitions.limit_until(queue, tenant, now))


def charge_progress(queue: Queue, tenant: Tenant, job: Job, now: float) -> None:
    if transitions.charge_progress(queue, tenant, job, now):
        queue.index(tenant)


def _hold(queue: Queue, tenant: Tenant, until: float | None) -> None:
    if until is not None:
        heapq.heappush(queue.limited, (until, tenant.name))


def first_limited(queue: Queue, now: float) -> Tenant | None:
    """The tenant whose rate limit ends first, if it ends by ``now`` (stale entries dropped)."""
    while queue.limited:
        until, name = queue.limited[0]
        tenant = queue.tenants.get(name)
        if tenant is None or tenant.limited_until != until:
            heapq.heappop(queue.limited)
            continue
        return tenant if until <= now else None
    return None


def next_limited(queue: Queue) -> float | None:
    while queue.limited:
        until, name = queue.limited[0]
        tenant = queue.tenants.get(name)
        if tenant is not None and tenant.limited_until == until:
            return until
        heapq.heappop(queue.limited)
    return None
