"""An idle tenant's state expires: pruning the last job stored for a tenant forgets it (its
counters, finish tag, recent usage) unless it has settings of its own or a rate state still in
the future. A returning tenant starts like a new one, S = V."""

from __future__ import annotations

from fairq.contract import (
    Backend,
    FailParams,
    MaintainParams,
    QueueSettings,
    SetQueueParams,
    StatsParams,
)
from fairq.policy.rate import Rate

from .helpers import Q, ack, enqueue, new_job, new_jobs, set_tenant, stat, take, take_one

RETENTION = 10.0


def prune(backend: Backend, now: float) -> int:
    return backend.maintain(MaintainParams(now=now, retention=RETENTION)).pruned


def tenants(backend: Backend) -> list[str]:
    return [row.tenant for row in backend.stats(StatsParams())]


def run_one(backend: Backend, n: int, tenant: str = "a", *, now: float = 0.0) -> None:
    """Enqueue one job, run it one second and ack it."""
    enqueue(backend, [new_job(n, tenant)], now=now)
    ack(backend, take_one(backend, now), now + 1.0)


def test_a_tenant_is_forgotten_when_its_last_succeeded_job_is_pruned(backend: Backend) -> None:
    run_one(backend, 1, "a")
    run_one(backend, 2, "b")
    assert prune(backend, now=5.0) == 0
    assert tenants(backend) == ["a", "b"]
    assert prune(backend, now=100.0) == 2
    assert tenants(backend) == []
    assert backend.stats(StatsParams(queue=Q, tenant="a")) == []


def test_a_returning_tenant_starts_like_a_new_one(backend: Backend) -> None:
    """a ran 50 s alone (F = 50, V = 0): remembered, b would be served 50 times first."""
    enqueue(backend, [new_job(1, "a", lease=100.0)])
    ack(backend, take_one(backend, 0.0), 50.0)
    assert prune(backend, now=200.0) == 1
    enqueue(backend, new_jobs("b", range(10, 13)), now=200.0)
    enqueue(backend, new_jobs("a", range(20, 23)), now=200.0)
    assert [lease.tenant for lease in take(backend, 200.0, limit=4)] == ["b", "a", "b", "a"]
    row = stat(backend, "a")
    assert (row.succeeded, row.running, row.ready) == (0, 2, 1)  # counters since last seen


def test_a_forgotten_tenant_works_again_from_scratch(backend: Backend) -> None:
    run_one(backend, 1, "a:{x} y")
    assert prune(backend, now=100.0) == 1
    for n, now in ((2, 100.0), (3, 102.0)):
        run_one(backend, n, "a:{x} y", now=now)
    row = stat(backend, "a:{x} y")
    assert (row.succeeded, row.ready, row.running, row.failed) == (2, 0, 0, 0)
    assert prune(backend, now=200.0) == 2
    assert tenants(backend) == []


def test_kept_while_a_succeeded_job_is_still_stored(backend: Backend) -> None:
    run_one(backend, 1, "a")
    run_one(backend, 2, "a", now=50.0)
    assert prune(backend, now=55.0) == 1
    assert stat(backend, "a").succeeded == 2
    assert prune(backend, now=100.0) == 1
    assert tenants(backend) == []


def test_kept_while_a_dead_job_is_stored(backend: Backend) -> None:
    run_one(backend, 1, "a")
    enqueue(backend, [new_job(2, "a", max_attempts=1)], now=2.0)
    lease = take_one(backend, 2.0)
    backend.fail(FailParams(token=lease.token, now=3.0, error="boom", retry_at=None))
    assert prune(backend, now=100.0) == 1
    row = stat(backend, "a")
    assert (row.succeeded, row.failed, row.dead) == (1, 1, 1)


def test_kept_while_a_ready_scheduled_or_running_job_is_stored(backend: Backend) -> None:
    for tenant in ("a", "b", "c"):
        run_one(backend, len(tenant) * ord(tenant), tenant)
    enqueue(backend, [new_job(10, "a", run_at=500.0)], now=2.0)  # scheduled
    enqueue(backend, [new_job(11, "b", lease=1000.0)], now=2.0)
    assert take_one(backend, 2.0).tenant == "b"  # running
    enqueue(backend, [new_job(12, "c")], now=2.0)  # ready
    assert prune(backend, now=100.0) == 3
    assert tenants(backend) == ["a", "b", "c"]
    assert [stat(backend, t).succeeded for t in ("a", "b", "c")] == [1, 1, 1]


def test_kept_while_it_has_settings_of_its_own(backend: Backend) -> None:
    set_tenant(backend, "a", weight=2.0)
    set_tenant(backend, "b", max_running=1)
    set_tenant(backend, "c", rate=Rate(100, 1.0))
    for tenant in ("a", "b", "c"):
        run_one(backend, ord(tenant), tenant)
    assert prune(backend, now=100.0) == 3
    assert [stat(backend, t).succeeded for t in ("a", "b", "c")] == [1, 1, 1]
    assert stat(backend, "a").weight == 2.0


def test_kept_while_its_rate_state_is_in_the_future(backend: Backend) -> None:
    """The queue's rate: one start per 1000 s; a started at 0, so its tat is 1000."""
    limit = Rate(1, 1000.0)
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, rate=limit), now=0.0))
    run_one(backend, 1, "a")
    run_one(backend, 2, "b", now=999.0)  # tat 1999
    assert prune(backend, now=1500.0) == 2
    assert tenants(backend) == ["b"]
