"""Short helpers that make scenarios read as specifications. Time is always an explicit ``now``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fairq.contract import (
    AckManyParams,
    Backend,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    StatsParams,
    TenantSettingsParams,
    TenantStats,
)
from fairq.job import JobInfo, Lease, NewJob

Q = "default"


def new_job(
    n: int,
    tenant: str = "a",
    *,
    queue: str = Q,
    priority: int = 0,
    run_at: float = 0.0,
    max_attempts: int = 3,
    lease: float = 30.0,
    cost: float = 1.0,
    learn_cost: bool = True,
    name: str = "task",
) -> NewJob:
    return NewJob(
        id=f"j{n}",
        name=name,
        queue=queue,
        tenant=tenant,
        payload=f'{{"args":[{n}],"kwargs":{{}}}}',
        priority=priority,
        run_at=run_at,
        max_attempts=max_attempts,
        lease_timeout=lease,
        cost=cost,
        learn_cost=learn_cost,
    )


def new_jobs(tenant: str, ns: Iterable[int], **options: object) -> list[NewJob]:
    return [new_job(n, tenant, **options) for n in ns]  # type: ignore[arg-type]


def enqueue(backend: Backend, jobs: Sequence[NewJob], now: float = 0.0) -> None:
    backend.enqueue(EnqueueParams(jobs=jobs, now=now))


def take(
    backend: Backend, now: float = 0.0, limit: int = 1, queues: Sequence[str] = (Q,)
) -> list[Lease]:
    return backend.dequeue(
        DequeueParams(queues=queues, worker_id="w1", now=now, limit=limit)
    ).leases


def take_one(backend: Backend, now: float = 0.0) -> Lease:
    leases = take(backend, now)
    assert len(leases) == 1, f"expected one job at now={now}, got {leases}"
    return leases[0]


def tenants_taken(backend: Backend, count: int, now: float = 0.0) -> list[str]:
    """Tenants of ``count`` single dequeues at ``now`` (nothing acked)."""
    return [take_one(backend, now).tenant for _ in range(count)]


def ack(backend: Backend, lease: Lease, now: float) -> None:
    """Ack one job whose lease must still be held."""
    result = backend.ack_many(AckManyParams(tokens=[lease.token], now=now))
    assert list(result.acked) == [lease.token], f"lease {lease.token} was lost at {now}"


def ack_lost(backend: Backend, token: str, now: float) -> bool:
    """Ack one token; whether the store reported it lost (and so changed nothing)."""
    result = backend.ack_many(AckManyParams(tokens=[token], now=now))
    return list(result.lost) == [token] and not result.acked


def stat(backend: Backend, tenant: str, queue: str = Q) -> TenantStats:
    rows = backend.stats(StatsParams(queue=queue, tenant=tenant))
    assert len(rows) == 1, rows
    return rows[0]


def job(backend: Backend, job_id: str) -> JobInfo:
    (found,) = backend.get_jobs(GetJobsParams(ids=[job_id]))
    return found


def set_tenant(
    backend: Backend, tenant: str, *, now: float = 0.0, queue: str = Q, **settings: object
) -> TenantStats:
    params = TenantSettingsParams(queue=queue, tenant=tenant, now=now, **settings)  # type: ignore[arg-type]
    return backend.set_tenant(params)


def snapshot(backend: Backend, ids: Sequence[str]) -> tuple[object, ...]:
    """Everything observable about a store, to show that a refused call changed nothing."""
    return (backend.stats(StatsParams()), backend.get_jobs(GetJobsParams(ids=ids)))


def longest_run(items: Sequence[str], value: str) -> int:
    best = run = 0
    for item in items:
        run = run + 1 if item == value else 0
        best = max(best, run)
    return best
